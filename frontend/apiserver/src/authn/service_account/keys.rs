//! Service-account token keys: the signing key (`--service-account-signing-key-file`) and the
//! verification keys (`--service-account-key-file`, plus the signing key's own public half),
//! read from PEM as kube-apiserver reads them: RSA keys (PKCS#1 or PKCS#8) sign with RS256,
//! ECDSA P-256 / P-384 keys (PKCS#8 or SEC1 `EC PRIVATE KEY`) with ES256 / ES384; verification
//! files may hold private keys, public keys (`PUBLIC KEY`) or both.
//!
//! A key's ID is kube's: the unpadded base64url SHA-256 of its public key's DER
//! SubjectPublicKeyInfo, so a token's `kid` header names the same key on every server that
//! holds it, and the JWKS document (`/openid/v1/jwks`) lists each key under that ID.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use rustls_pki_types::pem::{PemObject, SectionKind};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::authn::der::{self, BIT_STRING, INTEGER, NULL, OCTET_STRING, OID, SEQUENCE};

/// Errors reading a key file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The file holds no PEM block this server reads as a key.
    #[error("no RSA or ECDSA key found in the PEM data")]
    NoKeys,
    /// A key block does not decode as the key its label says.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// The key's type or curve is not one service-account tokens are signed with.
    #[error("unsupported key: {0}")]
    Unsupported(&'static str),
    /// The key was read but signs nothing (rejected by the signature library).
    #[error("signing key rejected")]
    Rejected(#[from] jsonwebtoken::errors::Error),
}

/// 1.2.840.113549.1.1.1 (rsaEncryption).
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1 (id-ecPublicKey).
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// 1.2.840.10045.3.1.7 (prime256v1).
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// 1.3.132.0.34 (secp384r1).
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

impl Curve {
    fn from_oid(oid: &[u8]) -> Option<Curve> {
        match oid {
            OID_P256 => Some(Curve::P256),
            OID_P384 => Some(Curve::P384),
            _ => None,
        }
    }
}

/// A public key's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Material {
    /// Modulus and exponent as DER INTEGER contents (minimal, maybe with a leading zero).
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point (`04 || x || y`).
    Ec { curve: Curve, point: Vec<u8> },
}

fn unsigned(int: &[u8]) -> &[u8] {
    let zeros = int.iter().take_while(|b| **b == 0).count();
    &int[zeros.min(int.len().saturating_sub(1))..]
}

impl Material {
    /// The DER SubjectPublicKeyInfo, as Go's `x509.MarshalPKIXPublicKey` writes it.
    fn spki(&self) -> Vec<u8> {
        let (algorithm, key) = match self {
            Material::Rsa { n, e } => {
                let params = [der::encode(OID, OID_RSA), der::encode(NULL, &[])].concat();
                let key = der::encode(SEQUENCE, &[der::encode(INTEGER, n), der::encode(INTEGER, e)].concat());
                (params, key)
            }
            Material::Ec { curve, point } => {
                let curve = match curve {
                    Curve::P256 => OID_P256,
                    Curve::P384 => OID_P384,
                };
                ([der::encode(OID, OID_EC), der::encode(OID, curve)].concat(), point.clone())
            }
        };
        let bits = [&[0u8][..], &key].concat();
        der::encode(SEQUENCE, &[der::encode(SEQUENCE, &algorithm), der::encode(BIT_STRING, &bits)].concat())
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            Material::Rsa { .. } => Algorithm::RS256,
            Material::Ec { curve: Curve::P256, .. } => Algorithm::ES256,
            Material::Ec { curve: Curve::P384, .. } => Algorithm::ES384,
        }
    }

    fn into_public_key(self) -> Result<PublicKey, KeyError> {
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(self.spki()));
        let algorithm = self.algorithm();
        let alg = algorithm_name(algorithm);
        let (decoding, jwk) = match &self {
            Material::Rsa { n, e } => {
                let (n, e) = (unsigned(n), unsigned(e));
                let jwk = json!({"use": "sig", "kty": "RSA", "kid": kid, "alg": alg,
                    "n": URL_SAFE_NO_PAD.encode(n), "e": URL_SAFE_NO_PAD.encode(e)});
                (DecodingKey::from_rsa_raw_components(n, e), jwk)
            }
            Material::Ec { curve, point } => {
                let size = match curve {
                    Curve::P256 => 32,
                    Curve::P384 => 48,
                };
                if point.len() != 1 + 2 * size || point[0] != 0x04 {
                    return Err(KeyError::Malformed("EC public key (not an uncompressed point)"));
                }
                let x = URL_SAFE_NO_PAD.encode(&point[1..=size]);
                let y = URL_SAFE_NO_PAD.encode(&point[1 + size..]);
                let crv = if *curve == Curve::P256 { "P-256" } else { "P-384" };
                let decoding = DecodingKey::from_ec_components(&x, &y)?;
                (decoding, json!({"use": "sig", "kty": "EC", "kid": kid, "crv": crv, "alg": alg, "x": x, "y": y}))
            }
        };
        Ok(PublicKey { kid, algorithm, decoding, jwk })
    }
}

/// The JOSE name of an algorithm (`RS256`).
pub fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        _ => "unsupported",
    }
}

/// RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }.
fn pkcs1_public(der: &[u8]) -> Option<Material> {
    let (seq, _) = der::expect(SEQUENCE, der)?;
    let (n, rest) = der::expect(INTEGER, seq)?;
    let (e, _) = der::expect(INTEGER, rest)?;
    Some(Material::Rsa { n: n.to_vec(), e: e.to_vec() })
}

/// RSAPrivateKey ::= SEQUENCE { version, modulus, publicExponent, ... }.
fn pkcs1_private(der: &[u8]) -> Option<Material> {
    let (seq, _) = der::expect(SEQUENCE, der)?;
    let (_, rest) = der::expect(INTEGER, seq)?;
    let (n, rest) = der::expect(INTEGER, rest)?;
    let (e, _) = der::expect(INTEGER, rest)?;
    Some(Material::Rsa { n: n.to_vec(), e: e.to_vec() })
}

/// ECPrivateKey ::= SEQUENCE { version 1, privateKey OCTET STRING, [0] parameters OPTIONAL,
/// [1] publicKey BIT STRING OPTIONAL }: the public key must be present (openssl and every key
/// generator include it).
fn sec1(der: &[u8], mut curve: Option<Curve>) -> Result<Material, KeyError> {
    const MALFORMED: KeyError = KeyError::Malformed("EC private key");
    let (seq, _) = der::expect(SEQUENCE, der).ok_or(MALFORMED)?;
    let (_, rest) = der::expect(INTEGER, seq).ok_or(MALFORMED)?;
    let (_, mut rest) = der::expect(OCTET_STRING, rest).ok_or(MALFORMED)?;
    let mut point = None;
    while !rest.is_empty() {
        let (tag, contents, next) = der::der_element(rest).ok_or(MALFORMED)?;
        rest = next;
        match tag {
            0xa0 => {
                let (oid, _) = der::expect(OID, contents).ok_or(MALFORMED)?;
                curve = Some(Curve::from_oid(oid).ok_or(KeyError::Unsupported("EC curve other than P-256 or P-384"))?);
            }
            0xa1 => {
                let (bits, _) = der::expect(BIT_STRING, contents).ok_or(MALFORMED)?;
                point = bits.get(1..).map(<[u8]>::to_vec);
            }
            _ => {}
        }
    }
    let curve = curve.ok_or(KeyError::Malformed("EC private key (no curve)"))?;
    let point = point.ok_or(KeyError::Unsupported("EC private key without its public key"))?;
    Ok(Material::Ec { curve, point })
}

/// AlgorithmIdentifier ::= SEQUENCE { algorithm OID, parameters ANY OPTIONAL }: (algorithm,
/// curve for EC keys).
fn algorithm_identifier(der: &[u8]) -> Result<(&[u8], Option<Curve>), KeyError> {
    const MALFORMED: KeyError = KeyError::Malformed("algorithm identifier");
    let (oid, params) = der::expect(OID, der).ok_or(MALFORMED)?;
    match oid {
        OID_RSA => Ok((OID_RSA, None)),
        OID_EC => {
            let (curve, _) = der::expect(OID, params).ok_or(MALFORMED)?;
            let curve = Curve::from_oid(curve).ok_or(KeyError::Unsupported("EC curve other than P-256 or P-384"))?;
            Ok((OID_EC, Some(curve)))
        }
        _ => Err(KeyError::Unsupported("key type other than RSA or ECDSA")),
    }
}

/// SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier, subjectPublicKey BIT STRING }.
fn spki(der: &[u8]) -> Result<Material, KeyError> {
    const MALFORMED: KeyError = KeyError::Malformed("public key");
    let (seq, _) = der::expect(SEQUENCE, der).ok_or(MALFORMED)?;
    let (alg, rest) = der::expect(SEQUENCE, seq).ok_or(MALFORMED)?;
    let (bits, _) = der::expect(BIT_STRING, rest).ok_or(MALFORMED)?;
    let key = bits.get(1..).ok_or(MALFORMED)?;
    match algorithm_identifier(alg)? {
        (OID_RSA, _) => pkcs1_public(key).ok_or(MALFORMED),
        (_, Some(curve)) => Ok(Material::Ec { curve, point: key.to_vec() }),
        _ => Err(MALFORMED),
    }
}

/// PrivateKeyInfo ::= SEQUENCE { version, algorithm AlgorithmIdentifier, privateKey OCTET STRING }:
/// (the public numbers, the inner PKCS#1 key for RSA).
fn pkcs8(der: &[u8]) -> Result<(Material, Option<&[u8]>), KeyError> {
    const MALFORMED: KeyError = KeyError::Malformed("PKCS#8 private key");
    let (seq, _) = der::expect(SEQUENCE, der).ok_or(MALFORMED)?;
    let (_, rest) = der::expect(INTEGER, seq).ok_or(MALFORMED)?;
    let (alg, rest) = der::expect(SEQUENCE, rest).ok_or(MALFORMED)?;
    let (key, _) = der::expect(OCTET_STRING, rest).ok_or(MALFORMED)?;
    match algorithm_identifier(alg)? {
        (OID_RSA, _) => Ok((pkcs1_private(key).ok_or(MALFORMED)?, Some(key))),
        (_, curve) => Ok((sec1(key, curve)?, None)),
    }
}

/// The PKCS#8 PrivateKeyInfo holding SEC1 key `sec1` on `curve` (as `openssl pkcs8 -topk8`
/// writes it).
fn pkcs8_of_sec1(sec1: &[u8], curve: Curve) -> Vec<u8> {
    let curve = match curve {
        Curve::P256 => OID_P256,
        Curve::P384 => OID_P384,
    };
    let algorithm = der::encode(SEQUENCE, &[der::encode(OID, OID_EC), der::encode(OID, curve)].concat());
    der::encode(SEQUENCE, &[der::encode(INTEGER, &[0]), algorithm, der::encode(OCTET_STRING, sec1)].concat())
}

/// A key tokens are verified with.
#[derive(Clone)]
pub struct PublicKey {
    /// The key ID (`kid`).
    pub kid: String,
    /// The signature algorithm.
    pub algorithm: Algorithm,
    decoding: DecodingKey,
    jwk: Value,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey").field("kid", &self.kid).field("algorithm", &self.algorithm).finish()
    }
}

impl PublicKey {
    /// The key as a JSON Web Key (`use`, `kty`, `kid`, `alg` and the key's numbers).
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    pub(crate) fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }
}

/// The key tokens are signed with, and its public half.
#[derive(Clone)]
pub struct SigningKey {
    encoding: EncodingKey,
    public: PublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("public", &self.public).finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Reads the first private key of a PEM file.
    ///
    /// # Errors
    ///
    /// `NoKeys` without a private key; `Malformed`/`Unsupported` for keys this server does not
    /// sign with (other curves, an SEC1 key without its curve or public key); `Rejected` when
    /// the signature library refuses the key.
    pub fn from_pem(pem: &[u8]) -> Result<SigningKey, KeyError> {
        for section in <(SectionKind, Vec<u8>) as PemObject>::pem_slice_iter(pem) {
            let Ok((kind, der)) = section else { continue };
            let (material, encoding) = match kind {
                SectionKind::RsaPrivateKey => (
                    pkcs1_private(&der).ok_or(KeyError::Malformed("RSA private key"))?,
                    EncodingKey::from_rsa_der(&der),
                ),
                SectionKind::PrivateKey => match pkcs8(&der)? {
                    (material, Some(pkcs1)) => (material, EncodingKey::from_rsa_der(pkcs1)),
                    (material, None) => (material, EncodingKey::from_ec_der(&der)),
                },
                SectionKind::EcPrivateKey => {
                    let material = sec1(&der, None)?;
                    let Material::Ec { curve, .. } = &material else {
                        return Err(KeyError::Malformed("EC private key"));
                    };
                    // The signature library takes EC keys in PKCS#8 only: the same key, wrapped.
                    let wrapped = pkcs8_of_sec1(&der, *curve);
                    (material, EncodingKey::from_ec_der(&wrapped))
                }
                _ => continue,
            };
            let public = material.into_public_key()?;
            // Proves the key signs (a key that parses here but not in the signature library
            // would otherwise fail only at the first token request).
            jsonwebtoken::encode(&Header::new(public.algorithm), &json!({}), &encoding)?;
            return Ok(SigningKey { encoding, public });
        }
        Err(KeyError::NoKeys)
    }

    /// Generates an ECDSA P-256 key (as `ballast serve` does when given none) and returns it
    /// with its PKCS#8 PEM, to be persisted so that restarts keep tokens valid.
    ///
    /// # Errors
    ///
    /// As [`SigningKey::from_pem`], which reads the generated key back.
    pub fn generate() -> Result<(SigningKey, String), KeyError> {
        let pair = rcgen::KeyPair::generate().map_err(|_| KeyError::Unsupported("key generation failed"))?;
        let pem = pair.serialize_pem();
        Ok((SigningKey::from_pem(pem.as_bytes())?, pem))
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `claims` with a header naming the algorithm and key ID (and no `typ`, as kube's).
    ///
    /// # Errors
    ///
    /// When the signature library fails (not expected for a key that loaded).
    pub fn sign(&self, claims: &impl serde::Serialize) -> Result<String, KeyError> {
        let mut header = Header::new(self.public.algorithm);
        header.typ = None;
        header.kid = Some(self.public.kid.clone());
        Ok(jsonwebtoken::encode(&header, claims, &self.encoding)?)
    }
}

/// Reads every key of a verification key file: private keys (their public halves) and `PUBLIC
/// KEY` blocks.
///
/// # Errors
///
/// `NoKeys` when the file has none; `Malformed`/`Unsupported` for a block that is not a key this
/// server verifies with.
pub fn public_keys_from_pem(pem: &[u8]) -> Result<Vec<PublicKey>, KeyError> {
    let mut keys = Vec::new();
    for section in <(SectionKind, Vec<u8>) as PemObject>::pem_slice_iter(pem) {
        let Ok((kind, der)) = section else { continue };
        let material = match kind {
            SectionKind::RsaPrivateKey => pkcs1_private(&der).ok_or(KeyError::Malformed("RSA private key"))?,
            SectionKind::PrivateKey => pkcs8(&der)?.0,
            SectionKind::EcPrivateKey => sec1(&der, None)?,
            SectionKind::PublicKey => spki(&der)?,
            _ => continue,
        };
        keys.push(material.into_public_key()?);
    }
    if keys.is_empty() {
        return Err(KeyError::NoKeys);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claims of `token`, verified with `key` (signature only).
    fn claims_of(token: &str, key: &PublicKey) -> Value {
        let mut validation = jsonwebtoken::Validation::new(key.algorithm);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        jsonwebtoken::decode::<Value>(token, key.decoding(), &validation).expect("verifies").claims
    }

    #[test]
    fn generated_keys_sign_and_their_public_halves_verify() {
        let (key, pem) = SigningKey::generate().expect("generate");
        assert_eq!(key.public().algorithm, Algorithm::ES256);
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
        let token = key.sign(&json!({"sub": "x"})).expect("sign");
        let header = jsonwebtoken::decode_header(&token).expect("header");
        assert_eq!(header.kid.as_deref(), Some(key.public().kid.as_str()));
        // The same file read as a verification key gives the same key ID.
        let keys = public_keys_from_pem(pem.as_bytes()).expect("public keys");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid, key.public().kid);
        assert_eq!(claims_of(&token, &keys[0])["sub"], "x");
        assert_eq!(keys[0].jwk()["crv"], "P-256");
    }

    #[test]
    fn public_key_blocks_give_the_key_id_of_their_private_key() {
        let pair = rcgen::KeyPair::generate().expect("key");
        let from_private = public_keys_from_pem(pair.serialize_pem().as_bytes()).expect("private");
        let public_pem = pair.public_key_pem();
        let from_public = public_keys_from_pem(public_pem.as_bytes()).expect("public");
        assert_eq!(from_private[0].kid, from_public[0].kid);
        // The key ID hashes the SubjectPublicKeyInfo rcgen writes, byte for byte.
        use rcgen::PublicKeyData;
        let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(pair.subject_public_key_info()));
        assert_eq!(from_public[0].kid, expected);
    }

    /// A P-384 key as `openssl ecparam -name secp384r1 -genkey -noout` writes it (SEC1, with
    /// the curve and the public key).
    const SEC1_P384: &str = "-----BEGIN EC PRIVATE KEY-----
MIGkAgEBBDAjoARN5zfAuouUzGjJPwKRz+sc/awhAa0P5KObyNdNfCza9CAvSiKS
Vxe/sar5Tj2gBwYFK4EEACKhZANiAAQgcsBrwgropXUL+WH1IxKr//alVfDblSqS
LYVpKNfSja9cxAkLTin4qD+xUs+No+9d4sTcGbsvuQqxPEfDrSXFlL6PLoc4k/R+
VUWbhl09xVNjqr+gP2a8d3JgQJa/xkc=
-----END EC PRIVATE KEY-----
";

    #[test]
    fn sec1_keys_sign() {
        let key = SigningKey::from_pem(SEC1_P384.as_bytes()).expect("SEC1 signing key");
        assert_eq!(key.public().algorithm, Algorithm::ES384);
        let token = key.sign(&json!({"sub": "x"})).expect("sign");
        let keys = public_keys_from_pem(SEC1_P384.as_bytes()).expect("public keys");
        assert_eq!(keys[0].kid, key.public().kid, "the same key ID as a verification key");
        assert_eq!(claims_of(&token, &keys[0])["sub"], "x");
        assert_eq!(keys[0].jwk()["crv"], "P-384");
        // Without its curve the key cannot be read.
        let bare = "-----BEGIN EC PRIVATE KEY-----\nMAMCAQE=\n-----END EC PRIVATE KEY-----\n";
        assert!(SigningKey::from_pem(bare.as_bytes()).is_err());
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        assert!(matches!(public_keys_from_pem(b"not a key"), Err(KeyError::NoKeys)));
        let bad = "-----BEGIN PUBLIC KEY-----\nMAMCAQA=\n-----END PUBLIC KEY-----\n";
        assert!(public_keys_from_pem(bad.as_bytes()).is_err());
        let bad = "-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----\n";
        assert!(SigningKey::from_pem(bad.as_bytes()).is_err());
    }
}
