//! Request-header authentication (`--requestheader-*`): a front proxy (kube's aggregator, an
//! authenticating proxy) that has authenticated the user itself presents a client certificate
//! signed by the request-header CA, and names the user in headers (`X-Remote-User`,
//! `X-Remote-Uid`, `X-Remote-Group`, `X-Remote-Extra-<key>`).
//!
//! As kube's: without a client certificate this authenticator does not apply; a certificate
//! that does not verify against the request-header CA, or whose CommonName is not among the
//! allowed names (any name when the list is empty), is an error that other authenticators may
//! still override (the same connection's certificate may be an ordinary client certificate);
//! a verified proxy that names no user leaves the request to the other authenticators. The
//! headers are honoured only from a verified proxy, and [`RequestHeaderAuthenticator::strip`]
//! removes them from every authenticated request so nothing behind sees a forged identity.

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use super::user::UserInfo;
use super::x509::{X509Authenticator, X509Error};

/// The request-header settings, named after kube-apiserver's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// `--requestheader-client-ca-file`'s PEM bundle.
    pub client_ca_pem: String,
    /// `--requestheader-allowed-names`: proxy certificate CommonNames (empty: any).
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`: the first one with a value names the user.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`: the first one with a value is the uid.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`: every value of every one is a group.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`: `<prefix><key>` headers are extra values.
    pub extra_headers_prefix: Vec<String>,
}

/// What the authenticator decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderOutcome {
    /// No proxy certificate, or a verified proxy naming no user.
    NotMine,
    /// The user the proxy names.
    Authenticated(UserInfo),
    /// A certificate that is not a trusted proxy's, with kube's reason.
    Failed(String),
}

/// Trusts identities in headers from verified proxies.
#[derive(Debug, Clone)]
pub struct RequestHeaderAuthenticator {
    ca: X509Authenticator,
    /// As configured (and published).
    config: RequestHeaderConfig,
    /// The header names trimmed and lowercased, as `http` spells header names.
    headers: RequestHeaderConfig,
}

impl RequestHeaderAuthenticator {
    /// Builds the authenticator; header names are trimmed, and matched case-insensitively.
    ///
    /// # Errors
    ///
    /// When the CA bundle holds no usable certificate.
    pub fn new(config: RequestHeaderConfig) -> Result<Self, X509Error> {
        let ca = X509Authenticator::from_pem(&config.client_ca_pem)?;
        let mut headers = config.clone();
        for list in [
            &mut headers.username_headers,
            &mut headers.uid_headers,
            &mut headers.group_headers,
            &mut headers.extra_headers_prefix,
        ] {
            *list = list.iter().map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect();
        }
        Ok(RequestHeaderAuthenticator { ca, config, headers })
    }

    /// The settings, as the `extension-apiserver-authentication` ConfigMap publishes them.
    pub fn config(&self) -> &RequestHeaderConfig {
        &self.config
    }

    /// The CA verifier (its subjects are offered as certificate hints during the handshake).
    pub fn ca(&self) -> &X509Authenticator {
        &self.ca
    }

    /// Decides one request from its client certificate chain and headers.
    pub fn authenticate(&self, chain: &[CertificateDer<'static>], headers: &HeaderMap) -> HeaderOutcome {
        if chain.is_empty() {
            return HeaderOutcome::NotMine;
        }
        let Some(proxy) = self.ca.authenticate(chain) else {
            return HeaderOutcome::Failed(
                "verifying certificate failed: x509: certificate signed by unknown authority".into(),
            );
        };
        if !self.config.allowed_names.is_empty() && !self.config.allowed_names.contains(&proxy.name) {
            return HeaderOutcome::Failed(format!("x509: subject with cn={} is not in the allowed list", proxy.name));
        }
        let first = |names: &[String]| {
            names.iter().find_map(|n| headers.get(n).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()))
        };
        let Some(name) = first(&self.headers.username_headers) else { return HeaderOutcome::NotMine };
        let uid = first(&self.headers.uid_headers).unwrap_or("");
        let groups = self
            .config
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h).iter())
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect();
        let mut user = UserInfo::new(name, uid, groups);
        for prefix in &self.headers.extra_headers_prefix {
            for (header, value) in headers {
                let Some(key) = header.as_str().strip_prefix(prefix.as_str()) else { continue };
                if let Ok(value) = value.to_str() {
                    user.extra.entry(unescape(key)).or_default().push(value.to_string());
                }
            }
        }
        HeaderOutcome::Authenticated(user)
    }

    /// Removes every header this authenticator reads (kube's `ClearAuthenticationHeaders`).
    pub fn strip(&self, headers: &mut HeaderMap) {
        for name in
            self.headers.username_headers.iter().chain(&self.headers.uid_headers).chain(&self.headers.group_headers)
        {
            headers.remove(name.as_str());
        }
        let extra: Vec<http::HeaderName> = headers
            .keys()
            .filter(|h| self.headers.extra_headers_prefix.iter().any(|p| h.as_str().starts_with(p.as_str())))
            .cloned()
            .collect();
        for name in extra {
            headers.remove(name);
        }
    }
}

/// Percent-decodes an extra key (kube's `url.PathUnescape`); a malformed escape keeps the key
/// as sent, as kube does.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca() -> Ca {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "front-proxy-ca");
        let cert = params.self_signed(&key).expect("ca");
        Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    fn client(ca: &Ca, cn: &str) -> CertificateDer<'static> {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.signed_by(&key, &ca.issuer).expect("cert").der().clone()
    }

    fn authenticator(ca: &Ca) -> RequestHeaderAuthenticator {
        RequestHeaderAuthenticator::new(RequestHeaderConfig {
            client_ca_pem: ca.pem.clone(),
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        })
        .expect("authenticator")
    }

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", "alice".parse().expect("value"));
        h.insert("x-remote-uid", "u-1".parse().expect("value"));
        h.append("x-remote-group", "dev".parse().expect("value"));
        h.append("x-remote-group", "ops".parse().expect("value"));
        h.insert("x-remote-extra-scopes%2fread", "yes".parse().expect("value"));
        h
    }

    #[test]
    fn a_trusted_proxy_names_the_user() {
        let ca = ca();
        let authn = authenticator(&ca);
        let HeaderOutcome::Authenticated(user) = authn.authenticate(&[client(&ca, "front-proxy-client")], &headers())
        else {
            panic!("not authenticated")
        };
        assert_eq!((user.name.as_str(), user.uid.as_str()), ("alice", "u-1"));
        assert_eq!(user.groups, vec!["dev", "ops"]);
        assert_eq!(user.extra["scopes/read"], vec!["yes"]);
        let mut h = headers();
        h.insert("accept", "application/json".parse().expect("value"));
        authn.strip(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
    }

    #[test]
    fn other_names_other_cas_and_no_certificate_are_not_trusted() {
        let ca = ca();
        let authn = authenticator(&ca);
        assert_eq!(
            authn.authenticate(&[client(&ca, "mallory")], &headers()),
            HeaderOutcome::Failed("x509: subject with cn=mallory is not in the allowed list".into())
        );
        let other = self::ca();
        assert!(matches!(
            authn.authenticate(&[client(&other, "front-proxy-client")], &headers()),
            HeaderOutcome::Failed(_)
        ));
        assert_eq!(authn.authenticate(&[], &headers()), HeaderOutcome::NotMine);
        assert_eq!(authn.authenticate(&[client(&ca, "front-proxy-client")], &HeaderMap::new()), HeaderOutcome::NotMine);
    }

    #[test]
    fn extra_keys_are_unescaped_like_kube() {
        assert_eq!(unescape("a%2fb"), "a/b");
        assert_eq!(unescape("bad%zz"), "bad%zz");
        assert_eq!(unescape("plain"), "plain");
    }
}
