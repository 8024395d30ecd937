//! Certificates for the secure port, generated once and reused.
//!
//! On first start [`ensure`] creates, in the cert directory, a CA (`ca.crt`, `ca.key`), a serving
//! certificate signed by it for `localhost`, `127.0.0.1` and `::1` (`apiserver.crt`,
//! `apiserver.key`) and an admin client certificate (`admin.crt`, `admin.key`, CN
//! `kubernetes-admin`, O `system:masters`, the group bound to cluster-admin), and writes
//! `admin.kubeconfig` so `kubectl --kubeconfig <dir>/admin.kubeconfig` works at once. Later
//! starts reuse the files; if any certificate or key is missing, all are made anew (old
//! kubeconfigs then stop working, which is why nothing is regenerated while the set is whole).
//! The kubeconfig is rewritten on every start, because the port may change.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SigningKey,
};

/// File names inside the cert directory.
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate.
pub const SERVING_CERT: &str = "apiserver.crt";
/// The serving certificate's key.
pub const SERVING_KEY: &str = "apiserver.key";
/// The admin client certificate.
pub const ADMIN_CERT: &str = "admin.crt";
/// The admin client certificate's key.
pub const ADMIN_KEY: &str = "admin.key";
/// The admin kubeconfig.
pub const ADMIN_KUBECONFIG: &str = "admin.kubeconfig";

/// Failures while making or reading certificates.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// rcgen failed to make a key or certificate.
    #[error("generating certificates")]
    Generate(#[from] rcgen::Error),
}

/// The PEM texts of the certificate set.
#[derive(Debug, Clone)]
pub struct CertSet {
    /// The directory the files live in.
    pub dir: PathBuf,
    /// CA certificate (PEM); also the default client CA.
    pub ca_cert_pem: String,
    /// Serving certificate (PEM).
    pub serving_cert_pem: String,
    /// Serving key (PKCS#8 PEM).
    pub serving_key_pem: String,
    /// Admin client certificate (PEM).
    pub admin_cert_pem: String,
    /// Admin client key (PKCS#8 PEM).
    pub admin_key_pem: String,
}

fn read(dir: &Path, name: &str) -> Result<String, CertError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| CertError::Io { path, source })
}

/// Writes `contents` to `dir/name`, readable by the owner only when `private` (keys).
///
/// # Errors
///
/// `Io` when the file cannot be written.
pub fn write(dir: &Path, name: &str, contents: &str, private: bool) -> Result<(), CertError> {
    let path = dir.join(name);
    let io = |source| CertError::Io { path: path.clone(), source };
    std::fs::write(&path, contents).map_err(io)?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

/// Loads the certificate set from `dir`, generating it first if any file is missing.
///
/// # Errors
///
/// Returns `Io` when the directory cannot be created or a file cannot be read or written, and
/// `Generate` when key or certificate generation fails.
pub fn ensure(dir: &Path) -> Result<CertSet, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Io { path: dir.to_path_buf(), source })?;
    let names = [CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY, ADMIN_CERT, ADMIN_KEY];
    if !names.iter().all(|n| dir.join(n).is_file()) {
        generate(dir)?;
    }
    Ok(CertSet {
        dir: dir.to_path_buf(),
        ca_cert_pem: read(dir, CA_CERT)?,
        serving_cert_pem: read(dir, SERVING_CERT)?,
        serving_key_pem: read(dir, SERVING_KEY)?,
        admin_cert_pem: read(dir, ADMIN_CERT)?,
        admin_key_pem: read(dir, ADMIN_KEY)?,
    })
}

/// A new self-signed CA named `common_name`: its key, its certificate, and the parameters that
/// make it an [`Issuer`] for the certificates it signs.
///
/// # Errors
///
/// `Generate` when rcgen fails.
pub fn new_ca(common_name: &str) -> Result<(KeyPair, Certificate, CertificateParams), CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = params.self_signed(&key)?;
    Ok((key, cert, params))
}

/// A new client certificate (and its key) for `common_name`, in `organization` (a kube group)
/// when given, signed by `issuer`.
///
/// # Errors
///
/// `Generate` when rcgen fails.
pub fn new_client(
    common_name: &str,
    organization: Option<&str>,
    issuer: &Issuer<'_, impl SigningKey>,
) -> Result<(KeyPair, Certificate), CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        params.distinguished_name.push(DnType::OrganizationName, org);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    let cert = params.signed_by(&key, issuer)?;
    Ok((key, cert))
}

fn generate(dir: &Path) -> Result<(), CertError> {
    let (ca_key, ca_cert, ca_params) = new_ca("ballast-ca")?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let serving_key = KeyPair::generate()?;
    let sans = ["localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"];
    let mut serving = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let (admin_key, admin_cert) = new_client("kubernetes-admin", Some("system:masters"), &issuer)?;

    // Keys first and the CA certificate last, so a crash part-way leaves a set that `ensure`
    // sees as incomplete and regenerates.
    write(dir, CA_KEY, &ca_key.serialize_pem(), true)?;
    write(dir, SERVING_KEY, &serving_key.serialize_pem(), true)?;
    write(dir, ADMIN_KEY, &admin_key.serialize_pem(), true)?;
    write(dir, SERVING_CERT, &serving_cert.pem(), false)?;
    write(dir, ADMIN_CERT, &admin_cert.pem(), false)?;
    write(dir, CA_CERT, &ca_cert.pem(), false)?;
    Ok(())
}

/// Returns kubeconfig text for a cluster at `server` using client certificate credentials.
pub fn kubeconfig(server: &str, ca_pem: &str, client_cert_pem: &str, client_key_pem: &str, user: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ballast\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    \
         client-key-data: {key}\ncontexts:\n- name: {user}@ballast\n  context:\n    cluster: ballast\n    user: {user}\n\
         current-context: {user}@ballast\npreferences: {{}}\n",
        ca = b64(ca_pem),
        cert = b64(client_cert_pem),
        key = b64(client_key_pem),
    )
}

impl CertSet {
    /// Writes the admin kubeconfig for a server listening at `addr` to `path` (default
    /// `<dir>/admin.kubeconfig`); returns its path.
    ///
    /// # Errors
    ///
    /// Returns `Io` when the file cannot be written.
    pub fn write_admin_kubeconfig(&self, addr: SocketAddr, path: Option<&Path>) -> Result<PathBuf, CertError> {
        let host = match addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        let server = format!("https://{host}:{}", addr.port());
        let text =
            kubeconfig(&server, &self.ca_cert_pem, &self.admin_cert_pem, &self.admin_key_pem, "kubernetes-admin");
        let path = path.map_or_else(|| self.dir.join(ADMIN_KUBECONFIG), Path::to_path_buf);
        let dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(ADMIN_KUBECONFIG);
        write(&dir, name, &text, true)?;
        Ok(path)
    }
}

/// The generated service-account signing key's file name in the cert directory.
pub const SERVICE_ACCOUNT_KEY: &str = "service-account.key";

/// Returns the PEM of `<dir>/service-account.key`, generating an ECDSA P-256 key there first if
/// absent: the key tokens are signed with when no `--service-account-signing-key-file` is
/// given, kept beside the other generated keys so tokens stay valid across restarts.
///
/// # Errors
///
/// `Io` when the file cannot be read or written, `Generate` when key generation fails.
pub fn ensure_service_account_key(dir: &Path) -> Result<String, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Io { path: dir.to_path_buf(), source })?;
    if !dir.join(SERVICE_ACCOUNT_KEY).is_file() {
        write(dir, SERVICE_ACCOUNT_KEY, &KeyPair::generate()?.serialize_pem(), true)?;
    }
    read(dir, SERVICE_ACCOUNT_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = ensure(dir.path()).expect("generate");
        let second = ensure(dir.path()).expect("reuse");
        assert_eq!(first.ca_cert_pem, second.ca_cert_pem);
        assert_eq!(first.admin_key_pem, second.admin_key_pem);
        std::fs::remove_file(dir.path().join(SERVING_CERT)).expect("remove");
        let third = ensure(dir.path()).expect("regenerate");
        assert_ne!(first.ca_cert_pem, third.ca_cert_pem);
    }
}
