//! The few DER (ASN.1) pieces authentication reads and writes: certificate subjects, and the
//! public keys of service-account signing keys (whose SubjectPublicKeyInfo encoding names a key
//! in its key ID). Hand-written because only these shapes are needed and every length is
//! checked against the input, so a malformed key or certificate is refused, never a panic.

/// SEQUENCE.
pub(crate) const SEQUENCE: u8 = 0x30;
/// SET.
pub(crate) const SET: u8 = 0x31;
/// OBJECT IDENTIFIER.
pub(crate) const OID: u8 = 0x06;
/// INTEGER.
pub(crate) const INTEGER: u8 = 0x02;
/// BIT STRING.
pub(crate) const BIT_STRING: u8 = 0x03;
/// OCTET STRING.
pub(crate) const OCTET_STRING: u8 = 0x04;
/// NULL.
pub(crate) const NULL: u8 = 0x05;

/// One DER element: (tag, contents, rest of input).
pub(crate) fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// Reads an element that must carry `tag`: (contents, rest).
pub(crate) fn expect(tag: u8, input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (t, contents, rest) = der_element(input)?;
    (t == tag).then_some((contents, rest))
}

/// Encodes one element.
pub(crate) fn encode(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lengths_round_trip() {
        for len in [0usize, 5, 127, 128, 255, 256, 70_000] {
            let contents = vec![7u8; len];
            let encoded = encode(OCTET_STRING, &contents);
            let (got, rest) = expect(OCTET_STRING, &encoded).expect("decodes");
            assert_eq!((got.len(), rest.len()), (len, 0));
        }
        assert!(der_element(&[SEQUENCE, 0x82, 0x01]).is_none(), "truncated length");
        assert!(der_element(&[SEQUENCE, 0x05, 0x00]).is_none(), "contents shorter than the length");
    }
}
