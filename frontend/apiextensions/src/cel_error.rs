//! How a CEL evaluation error reads in a rule's failure.

/// The text of an evaluation error as kube prints it: a library function's own message,
/// without cel-rust's "Error executing function" wrapper.
pub(crate) fn text(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Evaluates `expr` in a context with the standard library, the strings extension and one
/// library (its overloads declared on the environment by `extension`, its functions
/// `register`ed on the context), its errors in the words rules show them: the libraries' unit
/// tests share it.
#[cfg(test)]
pub(crate) fn eval_in(
    extension: fn(&mut cel::Env) -> Result<(), cel::DeclarationError>,
    register: fn(&mut cel::Context<'static, 'static>) -> Result<(), String>,
    expr: &str,
) -> Result<cel::Value, String> {
    let mut env = cel::Env::stdlib();
    env.add_extension(cel::extensions::strings).map_err(|e| e.to_string())?;
    env.add_extension(extension).map_err(|e| e.to_string())?;
    let mut context = cel::Context::with_env(std::sync::Arc::new(env));
    register(&mut context)?;
    cel::Program::compile(expr).map_err(|e| e.to_string())?.execute(&context).map_err(|e| text(&e))
}
