//! How a CEL evaluation error reads in a rule's failure.

/// The text of an evaluation error as kube prints it: a library function's own message,
/// without cel-rust's "Error executing function" wrapper.
pub(crate) fn text(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
