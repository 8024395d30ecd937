//! Static bearer tokens (`--token-auth-file`): a CSV file of `token,user,uid,"group1,group2"`,
//! the format kube-apiserver reads. The groups column is optional; blank lines are skipped.

use std::collections::HashMap;
use std::path::Path;

use super::user::UserInfo;

/// Errors reading a token file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file")]
    Io(#[from] std::io::Error),
    /// A line has fewer than three columns or an unterminated quote.
    #[error("token file line {line}: {problem}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// The tokens of one file.
#[derive(Debug, Clone, Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Reads and parses the file at `path`.
    ///
    /// # Errors
    ///
    /// Returns `Io` when the file cannot be read and `Malformed` for a bad line.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        Self::parse(&std::fs::read_to_string(path)?)
    }

    /// Parses token-file text.
    ///
    /// # Errors
    ///
    /// Returns `Malformed` for a line with fewer than three columns, an empty token or user, or
    /// an unterminated quote.
    pub fn parse(text: &str) -> Result<Self, TokenFileError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let fields =
                split_csv(line).ok_or(TokenFileError::Malformed { line: line_no, problem: "unterminated quote" })?;
            if fields.len() < 3 {
                return Err(TokenFileError::Malformed { line: line_no, problem: "fewer than 3 columns" });
            }
            if fields[0].is_empty() || fields[1].is_empty() {
                return Err(TokenFileError::Malformed { line: line_no, problem: "empty token or user" });
            }
            let groups = fields
                .get(3)
                .map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect())
                .unwrap_or_default();
            let user = UserInfo::new(fields[1].clone(), fields[2].clone(), groups);
            users.insert(fields[0].clone(), user);
        }
        Ok(TokenFile { users })
    }

    /// Returns the user a token belongs to.
    pub fn lookup(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }
}

/// Splits one CSV line; quoted fields may contain commas and `""` escapes.
fn split_csv(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', false) if field.is_empty() => quoted = true,
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', true) => quoted = false,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_groups_and_optional_column() {
        let file = TokenFile::parse("t1,alice,1,\"a,b\"\n\nt2,bob,2\n").expect("parse");
        assert_eq!(file.lookup("t1").map(|u| u.groups.clone()), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(file.lookup("t2").map(|u| u.name.as_str()), Some("bob"));
        assert!(file.lookup("t3").is_none());
    }

    #[test]
    fn rejects_short_lines() {
        assert!(matches!(TokenFile::parse("t1,alice"), Err(TokenFileError::Malformed { line: 1, .. })));
    }
}
