//! Client-certificate authentication.
//!
//! The TLS layer uses [`RequestClientCert`]: it asks for a certificate, checks the handshake
//! signature (proof the client holds the key) but accepts any chain, as kube-apiserver's
//! `tls.RequestClientCert` does. [`X509Authenticator`] then verifies the chain against the
//! client CA for client-auth use; a chain that fails makes the request 401 rather than killing
//! the connection, so other credentials on the same connection still work.
//!
//! The user is the subject's CommonName and the groups its Organization values.
//!
//! Verification is remembered: a chain that verified is not verified again until the earliest
//! `notAfter` in it passes (each verification is an ECDSA or RSA signature check per link, about
//! a tenth of the frontend's CPU for a request of a client with a certificate, and the same
//! chain comes with every request of a connection and of each reconnect). A verdict is about
//! this authenticator's CA bundle, so a new bundle (a new authenticator) starts afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::der::{der_element, OID, SEQUENCE, SET};
use super::user::UserInfo;

/// Verifies client chains against the client CA and maps subjects to users.
#[derive(Debug, Clone)]
pub struct X509Authenticator {
    verifier: Arc<dyn ClientCertVerifier>,
    verified: Arc<Mutex<HashMap<Vec<u8>, Verified>>>,
}

/// Distinct chains whose verification is remembered. A cluster's clients with certificates are
/// its nodes' kubelets and proxies, its controllers and its administrators: a few per node. At
/// about 2 KB a chain, 16,384 hold 32 MB at most; past it the memory is emptied and refilled
/// by the chains in use.
const VERIFIED_CHAINS: usize = 16_384;

/// A chain that verified: its user, and until when (the earliest `notAfter` of the chain, in
/// Unix seconds).
#[derive(Debug, Clone)]
struct Verified {
    user: UserInfo,
    until: i64,
}

/// Errors building the verifier from the client CA bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum X509Error {
    /// The bundle holds no usable certificate.
    #[error("client CA bundle holds no usable certificate")]
    NoCertificates,
    /// rustls rejected the roots.
    #[error("building the client certificate verifier")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

impl X509Authenticator {
    /// Builds the authenticator from a PEM bundle of client CA certificates.
    ///
    /// # Errors
    ///
    /// Returns `NoCertificates` when the bundle has none that parse, `Verifier` if rustls
    /// rejects them.
    pub fn from_pem(ca_pem: &str) -> Result<Self, X509Error> {
        use rustls_pki_types::pem::PemObject;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()).flatten() {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(X509Error::NoCertificates);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
        Ok(X509Authenticator { verifier, verified: Arc::default() })
    }

    /// Returns the user of a chain (end-entity first) that verifies, or `None`.
    pub fn authenticate(&self, chain: &[CertificateDer<'static>]) -> Option<UserInfo> {
        let (end_entity, intermediates) = chain.split_first()?;
        let unix_now = crate::clock::unix_now();
        let key = chain_key(chain);
        let remembered = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
        if let Some(v) = remembered.filter(|v| unix_now < v.until) {
            return Some(v.user);
        }
        let now = UnixTime::since_unix_epoch(Duration::from_secs(unix_now.max(0) as u64));
        self.verifier.verify_client_cert(end_entity, intermediates, now).ok()?;
        let subject = subject(end_entity.as_ref())?;
        let name = subject.common_name?;
        if name.is_empty() {
            return None;
        }
        let user = UserInfo::new(name, "", subject.organizations);
        // A chain whose expiry cannot be read is verified every time.
        if let Some(until) = chain.iter().map(|c| not_after(c.as_ref())).min().flatten() {
            let mut verified = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if verified.len() >= VERIFIED_CHAINS {
                verified.clear();
            }
            verified.insert(key, Verified { user: user.clone(), until });
        }
        Some(user)
    }

    /// Returns the TLS-level verifier that requests but does not require a client certificate.
    pub fn tls_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.tls_verifier_also_hinting(&[])
    }

    /// As [`X509Authenticator::tls_verifier`], also naming the CAs of `others` (the
    /// request-header CA) among the acceptable issuers the handshake lists: clients such as Go's
    /// send a certificate only if its issuer is listed.
    pub fn tls_verifier_also_hinting(&self, others: &[&X509Authenticator]) -> Arc<dyn ClientCertVerifier> {
        let mut hints = self.verifier.root_hint_subjects().to_vec();
        for other in others {
            for hint in other.verifier.root_hint_subjects() {
                if !hints.iter().any(|h| h.as_ref() == hint.as_ref()) {
                    hints.push(hint.clone());
                }
            }
        }
        Arc::new(RequestClientCert { inner: self.verifier.clone(), hints })
    }
}

/// The TLS-level client verifier: requests a certificate, checks handshake signatures, and leaves
/// chain verification to [`X509Authenticator`].
#[derive(Debug)]
struct RequestClientCert {
    inner: Arc<dyn ClientCertVerifier>,
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The chain's certificates, each after its length, as one key.
fn chain_key(chain: &[CertificateDer<'static>]) -> Vec<u8> {
    let mut key = Vec::with_capacity(chain.iter().map(|c| c.as_ref().len() + 4).sum());
    for cert in chain {
        key.extend_from_slice(&(cert.as_ref().len() as u32).to_be_bytes());
        key.extend_from_slice(cert.as_ref());
    }
    key
}

/// The fields of a DER certificate's tbsCertificate from its `n`th after the optional `[0]
/// version` (0 serialNumber, 1 signature, 2 issuer, 3 validity, 4 subject, ...) on.
fn tbs_fields_from(cert: &[u8], n: usize) -> Option<&[u8]> {
    let (SEQUENCE, cert, _) = der_element(cert)? else { return None };
    let (SEQUENCE, mut tbs, _) = der_element(cert)? else { return None };
    let (tag, _, rest) = der_element(tbs)?;
    if tag == 0xa0 {
        tbs = rest;
    }
    for _ in 0..n {
        tbs = der_element(tbs)?.2;
    }
    Some(tbs)
}

/// Reads a DER certificate's `notAfter` (the second time of its validity) as Unix seconds.
fn not_after(cert: &[u8]) -> Option<i64> {
    let (SEQUENCE, validity, _) = der_element(tbs_fields_from(cert, 3)?)? else { return None };
    let (_, _, rest) = der_element(validity)?;
    let (tag, time, _) = der_element(rest)?;
    asn1_time(tag, std::str::from_utf8(time).ok()?)
}

/// An X.509 time as Unix seconds: UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`), the two forms RFC 5280 allows.
fn asn1_time(tag: u8, text: &str) -> Option<i64> {
    const UTC_TIME: u8 = 0x17;
    const GENERALIZED_TIME: u8 = 0x18;
    let digits = text.strip_suffix('Z')?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, rest) = match (tag, digits.len()) {
        (UTC_TIME, 12) => {
            let yy: i64 = digits[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &digits[2..])
        }
        (GENERALIZED_TIME, 14) => (digits[..4].parse().ok()?, &digits[4..]),
        _ => return None,
    };
    let field = |i: usize| rest[i..i + 2].parse::<i64>().ok();
    let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // Days from 1970-01-01 to the date, proleptic Gregorian (the era-based civil-to-days method).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// The subject attributes authentication needs.
#[derive(Debug, Default, PartialEq, Eq)]
struct Subject {
    common_name: Option<String>,
    organizations: Vec<String>,
}

/// 2.5.4.3 (commonName) and 2.5.4.10 (organizationName), DER-encoded.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// Reads the subject of a DER certificate.
fn subject(cert: &[u8]) -> Option<Subject> {
    let (SEQUENCE, mut name, _) = der_element(tbs_fields_from(cert, 4)?)? else { return None };
    let mut subject = Subject::default();
    while !name.is_empty() {
        let (SET, mut rdn, rest) = der_element(name)? else { return None };
        name = rest;
        while !rdn.is_empty() {
            let (SEQUENCE, attr, rest) = der_element(rdn)? else { return None };
            rdn = rest;
            let (OID, oid, value) = der_element(attr)? else { return None };
            let (_, text, _) = der_element(value)?;
            let text = String::from_utf8_lossy(text).into_owned();
            if oid == OID_COMMON_NAME {
                subject.common_name = Some(text);
            } else if oid == OID_ORGANIZATION {
                subject.organizations.push(text);
            }
        }
    }
    Some(subject)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    #[test]
    fn reads_cn_and_organizations() {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, "kubernetes-admin");
        params.distinguished_name.push(DnType::OrganizationName, "system:masters");
        let cert = params.self_signed(&key).expect("cert");
        let subject = subject(cert.der().as_ref()).expect("subject");
        assert_eq!(subject.common_name.as_deref(), Some("kubernetes-admin"));
        assert_eq!(subject.organizations, vec!["system:masters"]);
    }

    #[test]
    fn verifies_chains_against_the_ca_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let set = crate::certs::ensure(dir.path()).expect("certs");
        let authn = X509Authenticator::from_pem(&set.ca_cert_pem).expect("authn");
        use rustls_pki_types::pem::PemObject;
        let admin = CertificateDer::from_pem_slice(set.admin_cert_pem.as_bytes()).expect("pem");
        let user = authn.authenticate(&[admin]).expect("admin verifies");
        assert_eq!(user.name, "kubernetes-admin");
        assert_eq!(user.groups, vec!["system:masters"]);
        // A self-signed certificate with the same subject is not trusted.
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, "kubernetes-admin");
        let forged = params.self_signed(&key).expect("cert");
        assert!(authn.authenticate(&[forged.der().clone()]).is_none());
        // The second time the verdict is remembered, and stays the same.
        let admin = CertificateDer::from_pem_slice(set.admin_cert_pem.as_bytes()).expect("pem");
        assert_eq!(authn.authenticate(std::slice::from_ref(&admin)).expect("remembered").name, "kubernetes-admin");
        assert!(authn.authenticate(&[forged.der().clone()]).is_none(), "a failure is never remembered as a success");
    }

    #[test]
    fn expiry_is_read_from_the_certificate() {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.not_after = rcgen::date_time_ymd(2031, 3, 9);
        let cert = params.self_signed(&key).expect("cert");
        // 2031-03-09T00:00:00Z.
        assert_eq!(not_after(cert.der().as_ref()), Some(1_930_780_800));
        params.not_after = rcgen::date_time_ymd(2061, 1, 1);
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(not_after(cert.der().as_ref()), Some(2_871_763_200), "GeneralizedTime past 2049");
        assert_eq!(asn1_time(0x17, "491231235959Z"), Some(2_524_607_999));
        assert_eq!(asn1_time(0x17, "500101000000Z"), Some(-631_152_000));
        assert_eq!(asn1_time(0x17, "501301000000Z"), None);
        assert_eq!(asn1_time(0x18, "20240229120000"), None, "no zone");
    }

    /// A remembered verdict ends with the certificate: past its `notAfter` it is verified again
    /// (and fails).
    #[test]
    fn a_remembered_chain_expires_with_its_certificate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let set = crate::certs::ensure(dir.path()).expect("certs");
        let authn = X509Authenticator::from_pem(&set.ca_cert_pem).expect("authn");
        use rustls_pki_types::pem::PemObject;
        let admin = CertificateDer::from_pem_slice(set.admin_cert_pem.as_bytes()).expect("pem");
        assert!(authn.authenticate(std::slice::from_ref(&admin)).is_some());
        let until = authn.verified.lock().expect("lock").values().next().expect("remembered").until;
        assert_eq!(Some(until), not_after(admin.as_ref()));
        // While it lasts, the memory answers (marked here so the test can tell).
        for v in authn.verified.lock().expect("lock").values_mut() {
            v.user.name = "remembered".into();
        }
        assert_eq!(authn.authenticate(std::slice::from_ref(&admin)).expect("remembered").name, "remembered");
        // Age the memory as if the certificate had expired: it is checked again, not trusted.
        for v in authn.verified.lock().expect("lock").values_mut() {
            v.until = 0;
            v.user.name = "someone-else".into();
        }
        assert_eq!(authn.authenticate(&[admin]).expect("verifies again").name, "kubernetes-admin");
    }
}
