//! The front-proxy certificates `ballast serve` generates (kube's `front-proxy-ca` and
//! `front-proxy-client`): a CA of its own, separate from the cluster CA so that a client
//! certificate of the cluster can never pass for the proxy, and the client certificate
//! (CN `front-proxy-client`) the aggregator presents to extension servers. Extension servers
//! trust the `X-Remote-*` headers of connections whose client certificate chains to
//! [`FRONT_PROXY_CA`] and names an allowed CN.
//!
//! Made once in the cert directory and reused, like the cluster certificates: if any file is
//! missing, the set is made anew.

use std::path::{Path, PathBuf};

use ballast_apiserver::certs::{new_ca, new_client, write, CertError};
use rcgen::Issuer;

/// The front-proxy CA certificate (what extension servers are told to trust for request-header
/// authentication: `--requestheader-client-ca-file`).
pub const FRONT_PROXY_CA: &str = "front-proxy-ca.crt";
/// The front-proxy CA key.
pub const FRONT_PROXY_CA_KEY: &str = "front-proxy-ca.key";
/// The client certificate the aggregator presents (`--proxy-client-cert-file`).
pub const FRONT_PROXY_CLIENT_CERT: &str = "front-proxy-client.crt";
/// Its key (`--proxy-client-key-file`).
pub const FRONT_PROXY_CLIENT_KEY: &str = "front-proxy-client.key";
/// The client certificate's common name, kube's (and the name extension servers allow with
/// `--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";

/// Where the front-proxy files are.
#[derive(Debug, Clone)]
pub struct FrontProxyFiles {
    /// The CA certificate.
    pub front_proxy_ca: PathBuf,
    /// The client certificate.
    pub client_cert: PathBuf,
    /// The client key.
    pub client_key: PathBuf,
}

/// Returns the front-proxy files in `dir`, generating them first if any is missing.
///
/// # Errors
///
/// `Io` when the directory or a file cannot be written, `Generate` when rcgen fails.
pub fn ensure(dir: &Path) -> Result<FrontProxyFiles, CertError> {
    let files = FrontProxyFiles {
        front_proxy_ca: dir.join(FRONT_PROXY_CA),
        client_cert: dir.join(FRONT_PROXY_CLIENT_CERT),
        client_key: dir.join(FRONT_PROXY_CLIENT_KEY),
    };
    let all = [FRONT_PROXY_CA, FRONT_PROXY_CA_KEY, FRONT_PROXY_CLIENT_CERT, FRONT_PROXY_CLIENT_KEY];
    if !all.iter().all(|n| dir.join(n).is_file()) {
        std::fs::create_dir_all(dir).map_err(|source| CertError::Io { path: dir.to_path_buf(), source })?;
        generate(dir)?;
    }
    Ok(files)
}

fn generate(dir: &Path) -> Result<(), CertError> {
    let (ca_key, ca_cert, ca) = new_ca("ballast-front-proxy-ca")?;
    let issuer = Issuer::new(ca, &ca_key);
    let (client_key, client_cert) = new_client(FRONT_PROXY_CLIENT_CN, None, &issuer)?;

    // Keys first and the CA certificate last: a crash part-way leaves an incomplete set,
    // which the next start makes anew.
    write(dir, FRONT_PROXY_CA_KEY, &ca_key.serialize_pem(), true)?;
    write(dir, FRONT_PROXY_CLIENT_KEY, &client_key.serialize_pem(), true)?;
    write(dir, FRONT_PROXY_CLIENT_CERT, &client_cert.pem(), false)?;
    write(dir, FRONT_PROXY_CA, &ca_cert.pem(), false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = ensure(dir.path()).expect("generate");
        let ca = std::fs::read_to_string(&first.front_proxy_ca).expect("ca");
        let again = ensure(dir.path()).expect("reuse");
        assert_eq!(ca, std::fs::read_to_string(&again.front_proxy_ca).expect("ca"));
        std::fs::remove_file(&first.client_key).expect("remove");
        let third = ensure(dir.path()).expect("regenerate");
        assert_ne!(ca, std::fs::read_to_string(&third.front_proxy_ca).expect("ca"));
    }
}
