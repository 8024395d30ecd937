//! How a CEL evaluation error reads in a rule's failure.

/// The text of an evaluation error as kube prints it: a library function's own message,
/// without cel-rust's "Error executing function" wrapper.
pub(crate) fn text(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Evaluates `expr` in a context with the standard library and one library `register`ed, its
/// errors in the words rules show them: the libraries' unit tests share it.
#[cfg(test)]
pub(crate) fn eval_with(
    register: fn(&mut cel::Context<'static, 'static>) -> Result<(), String>,
    expr: &str,
) -> Result<cel::Value, String> {
    let mut context = cel::Context::default();
    register(&mut context)?;
    cel::Program::compile(expr).map_err(|e| e.to_string())?.execute(&context).map_err(|e| text(&e))
}
