//! Client-certificate authentication.
//!
//! The TLS layer uses [`RequestClientCert`]: it asks for a certificate, checks the handshake
//! signature (proof the client holds the key) but accepts any chain, as kube-apiserver's
//! `tls.RequestClientCert` does. [`X509Authenticator`] then verifies the chain against the
//! client CA for client-auth use; a chain that fails makes the request 401 rather than killing
//! the connection, so other credentials on the same connection still work.
//!
//! The user is the subject's CommonName and the groups its Organization values.

use std::sync::Arc;
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
        Ok(X509Authenticator { verifier })
    }

    /// Returns the user of a chain (end-entity first) that verifies, or `None`.
    pub fn authenticate(&self, chain: &[CertificateDer<'static>]) -> Option<UserInfo> {
        let (end_entity, intermediates) = chain.split_first()?;
        let now = UnixTime::since_unix_epoch(Duration::from_secs(crate::clock::unix_now().max(0) as u64));
        self.verifier.verify_client_cert(end_entity, intermediates, now).ok()?;
        let subject = subject(end_entity.as_ref())?;
        let name = subject.common_name?;
        if name.is_empty() {
            return None;
        }
        Some(UserInfo::new(name, "", subject.organizations))
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

/// The subject attributes authentication needs.
#[derive(Debug, Default, PartialEq, Eq)]
struct Subject {
    common_name: Option<String>,
    organizations: Vec<String>,
}

/// 2.5.4.3 (commonName) and 2.5.4.10 (organizationName), DER-encoded.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// Reads the subject of a DER certificate: Certificate → tbsCertificate → (skip optional
/// `[0] version`, serialNumber, signature, issuer, validity) → subject.
fn subject(cert: &[u8]) -> Option<Subject> {
    let (SEQUENCE, cert, _) = der_element(cert)? else { return None };
    let (SEQUENCE, mut tbs, _) = der_element(cert)? else { return None };
    let (tag, _, rest) = der_element(tbs)?;
    if tag == 0xa0 {
        tbs = rest;
    }
    for _ in 0..4 {
        tbs = der_element(tbs)?.2;
    }
    let (SEQUENCE, mut name, _) = der_element(tbs)? else { return None };
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
    }
}
