//! Auth tokens, etcd's two kinds (`--auth-token`):
//!
//! * `simple` (the default): a random 16-letter prefix and a raft index, `<prefix>.<index>`.
//!   The member that checked the password proposes the prefix on shard 0's log; every member
//!   records it for the user when it applies the entry ([`SimpleTokens`]). A member asked with
//!   a token whose index it has not applied yet waits until it has, as etcd does. A token lives
//!   `--auth-token-ttl` (300 s) past its last use, on each member separately; tokens are kept
//!   in memory only, so a restart forgets them (clients authenticate again).
//! * `jwt,pub-key=<file>,priv-key=<file>,sign-method=<RS256|ES256|HS256|...>,ttl=<duration>`:
//!   a signed JWT with etcd's claims (`username`, `revision`, `exp`), checked by signature
//!   alone, so any member holding the key accepts it without a log entry ([`JwtTokens`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::clock::Clock;

/// etcd's default lifetime of a simple token after its last use (`--auth-token-ttl`).
pub const DEFAULT_SIMPLE_TTL: Duration = Duration::from_secs(300);

/// etcd's default lifetime of a JWT (`ttl=` option).
pub const DEFAULT_JWT_TTL: Duration = Duration::from_secs(300);

/// Letters of a simple token's random part (etcd's alphabet).
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Length of a simple token's random part (etcd's).
const PREFIX_LEN: usize = 16;

/// Why `--auth-token` was refused (etcd's "auth: invalid auth options" family).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenConfigError {
    /// The kind is neither `simple` nor `jwt`, or an option is malformed or repeated.
    #[error("auth: invalid auth options: {0}")]
    Options(String),
    /// A key file could not be read.
    #[error("auth: cannot read {0}: {1}")]
    Read(String, #[source] std::io::Error),
    /// The key does not suit the signing method.
    #[error("auth: invalid key for {0}: {1}")]
    Key(String, #[source] jsonwebtoken::errors::Error),
    /// Neither key was given.
    #[error("auth: missing key data")]
    MissingKey,
}

/// Returns a new simple token prefix: 16 random letters.
pub fn simple_prefix() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..PREFIX_LEN).map(|_| LETTERS[rng.gen_range(0..LETTERS.len())] as char).collect()
}

/// Splits a simple token into its prefix and index; None when it is not of that form.
pub fn split_simple(token: &str) -> Option<(&str, u64)> {
    let (prefix, index) = token.split_once('.')?;
    if index.contains('.') {
        return None;
    }
    Some((prefix, index.parse().ok()?))
}

/// The simple tokens a member knows: prefix -> (user, expiry).
#[derive(Debug)]
pub struct SimpleTokens {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
    ttl: Duration,
    clock: Arc<dyn Clock>,
}

impl SimpleTokens {
    /// Returns an empty table whose tokens live `ttl` past their last use.
    pub fn new(ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Self { tokens: Mutex::new(HashMap::new()), ttl, clock }
    }

    /// Records `prefix` as a token of `name`. Expired tokens are dropped here, so the table
    /// holds at most the tokens granted within one TTL.
    pub fn assign(&self, prefix: String, name: String) {
        let now = self.clock.now();
        let mut tokens = self.tokens.lock();
        tokens.retain(|_, (_, expiry)| *expiry > now);
        tokens.insert(prefix, (name, now + self.ttl));
    }

    /// Returns the user of token `prefix` and extends its life, or None when it is unknown or
    /// expired.
    pub fn user(&self, prefix: &str) -> Option<String> {
        let now = self.clock.now();
        let mut tokens = self.tokens.lock();
        let (name, expiry) = tokens.get_mut(prefix)?;
        if *expiry <= now {
            tokens.remove(prefix);
            return None;
        }
        *expiry = now + self.ttl;
        Some(name.clone())
    }

    /// Forgets every token of `name`.
    pub fn invalidate_user(&self, name: &str) {
        self.tokens.lock().retain(|_, (user, _)| user != name);
    }

    /// Forgets every token.
    pub fn clear(&self) {
        self.tokens.lock().clear();
    }
}

/// etcd's JWT claims.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Claims {
    username: String,
    revision: u64,
    exp: u64,
}

/// Signs and checks JWTs.
pub struct JwtTokens {
    algorithm: jsonwebtoken::Algorithm,
    encoding: Option<jsonwebtoken::EncodingKey>,
    decoding: jsonwebtoken::DecodingKey,
    ttl: Duration,
}

impl std::fmt::Debug for JwtTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtTokens").field("algorithm", &self.algorithm).field("ttl", &self.ttl).finish()
    }
}

impl JwtTokens {
    /// Returns a token for `username` checked at auth revision `revision`, valid `ttl` from
    /// `now_unix`; None when only a public key was given (etcd: "token signing attempted with
    /// verify-only key").
    pub fn sign(&self, username: &str, revision: u64, now_unix: u64) -> Option<String> {
        let key = self.encoding.as_ref()?;
        let claims = Claims { username: username.to_string(), revision, exp: now_unix + self.ttl.as_secs() };
        jsonwebtoken::encode(&jsonwebtoken::Header::new(self.algorithm), &claims, key).ok()
    }

    /// Returns the user and auth revision of a valid, unexpired token.
    pub fn check(&self, token: &str) -> Option<(String, u64)> {
        let mut validation = jsonwebtoken::Validation::new(self.algorithm);
        validation.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).ok()?;
        Some((data.claims.username, data.claims.revision))
    }
}

/// Which tokens the member issues.
#[derive(Clone, Debug)]
pub enum TokenKind {
    /// `simple`.
    Simple,
    /// `jwt,...`.
    Jwt(Arc<JwtTokens>),
}

/// Parses etcd's `--auth-token` value.
///
/// # Errors
/// etcd's refusals: an unknown kind, a malformed option, unreadable or unsuitable keys.
pub fn parse_token_option(value: &str) -> Result<TokenKind, TokenConfigError> {
    let mut parts = value.split(',');
    let kind = parts.next().unwrap_or_default();
    let mut opts = HashMap::new();
    for part in parts {
        let Some((k, v)) = part.split_once('=') else { return Err(TokenConfigError::Options(part.to_string())) };
        if opts.insert(k.to_string(), v.to_string()).is_some() {
            return Err(TokenConfigError::Options(format!("{k} given twice")));
        }
    }
    match kind {
        "simple" | "" => Ok(TokenKind::Simple),
        "jwt" => jwt_from_options(&opts).map(|j| TokenKind::Jwt(Arc::new(j))),
        other => Err(TokenConfigError::Options(format!("unknown token type {other:?}"))),
    }
}

fn jwt_from_options(opts: &HashMap<String, String>) -> Result<JwtTokens, TokenConfigError> {
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
    for k in opts.keys() {
        if !["pub-key", "priv-key", "sign-method", "ttl"].contains(&k.as_str()) {
            return Err(TokenConfigError::Options(format!("unknown option {k:?}")));
        }
    }
    let ttl = match opts.get("ttl") {
        Some(t) => parse_go_duration(t).ok_or_else(|| TokenConfigError::Options(format!("ttl={t}")))?,
        None => DEFAULT_JWT_TTL,
    };
    let read = |k: &str| -> Result<Option<Vec<u8>>, TokenConfigError> {
        opts.get(k).map(|p| std::fs::read(p).map_err(|e| TokenConfigError::Read(p.clone(), e))).transpose()
    };
    let (public, private) = (read("pub-key")?, read("priv-key")?);
    let method = opts.get("sign-method").map(String::as_str).unwrap_or_default();
    let algorithm: Algorithm =
        method.parse().map_err(|_| TokenConfigError::Options(format!("sign-method={method}")))?;
    let key_err = |e| TokenConfigError::Key(method.to_string(), e);
    let (encoding, decoding) = match algorithm {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
            let secret = private.ok_or(TokenConfigError::MissingKey)?;
            (Some(EncodingKey::from_secret(&secret)), DecodingKey::from_secret(&secret))
        }
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => {
            let public = public.ok_or(TokenConfigError::MissingKey)?;
            let enc = private.map(|p| EncodingKey::from_rsa_pem(&p)).transpose().map_err(key_err)?;
            (enc, DecodingKey::from_rsa_pem(&public).map_err(key_err)?)
        }
        Algorithm::ES256 | Algorithm::ES384 => {
            let public = public.ok_or(TokenConfigError::MissingKey)?;
            let enc = private.map(|p| EncodingKey::from_ec_pem(&p)).transpose().map_err(key_err)?;
            (enc, DecodingKey::from_ec_pem(&public).map_err(key_err)?)
        }
        Algorithm::EdDSA => {
            let public = public.ok_or(TokenConfigError::MissingKey)?;
            let enc = private.map(|p| EncodingKey::from_ed_pem(&p)).transpose().map_err(key_err)?;
            (enc, DecodingKey::from_ed_pem(&public).map_err(key_err)?)
        }
    };
    Ok(JwtTokens { algorithm, encoding, decoding, ttl })
}

/// Parses a Go duration of whole units ("300s", "5m", "1h30m", "1500ms").
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "h" => Duration::from_secs(3600),
            "m" => Duration::from_secs(60),
            "s" => Duration::from_secs(1),
            "ms" => Duration::from_millis(1),
            _ => return None,
        };
        total += unit * u32::try_from(n).ok()?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_simple_token_lives_its_ttl_past_its_last_use() {
        let clock = ManualClock::new();
        let tokens = SimpleTokens::new(Duration::from_secs(10), Arc::new(clock.clone()));
        tokens.assign("abc".into(), "u".into());
        clock.advance(Duration::from_secs(9));
        assert_eq!(tokens.user("abc").as_deref(), Some("u"));
        clock.advance(Duration::from_secs(9));
        assert_eq!(tokens.user("abc").as_deref(), Some("u"), "the use above extended it");
        clock.advance(Duration::from_secs(10));
        assert_eq!(tokens.user("abc"), None);
        tokens.assign("x".into(), "u".into());
        tokens.assign("y".into(), "v".into());
        tokens.invalidate_user("u");
        assert_eq!((tokens.user("x"), tokens.user("y").as_deref()), (None, Some("v")));
    }

    #[test]
    fn simple_tokens_and_options_parse_as_etcd_writes_them() {
        assert_eq!(split_simple("abcdefghijklmnop.42"), Some(("abcdefghijklmnop", 42)));
        assert_eq!(split_simple("abc"), None);
        assert_eq!(split_simple("a.b.3"), None);
        assert_eq!(simple_prefix().len(), 16);
        assert_eq!(parse_go_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("10x"), None);
        assert!(matches!(parse_token_option("simple"), Ok(TokenKind::Simple)));
        assert!(matches!(parse_token_option("other"), Err(TokenConfigError::Options(_))));
        assert!(matches!(parse_token_option("jwt,sign-method=RS256"), Err(TokenConfigError::MissingKey)));
        assert!(matches!(parse_token_option("jwt,bogus"), Err(TokenConfigError::Options(_))));
    }

    #[test]
    fn a_jwt_carries_user_and_revision_and_expires() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"0123456789abcdef").expect("write");
        let opt = format!("jwt,priv-key={},sign-method=HS256,ttl=1m", secret.display());
        let TokenKind::Jwt(jwt) = parse_token_option(&opt).expect("parses") else { panic!("jwt") };
        let now = crate::clock::unix_seconds();
        let token = jwt.sign("alice", 7, now).expect("signs");
        assert_eq!(jwt.check(&token), Some(("alice".to_string(), 7)));
        let old = jwt.sign("alice", 7, now - 120).expect("signs");
        assert_eq!(jwt.check(&old), None, "expired a minute ago");
        assert_eq!(jwt.check(&format!("{token}x")), None, "bad signature");
    }
}
