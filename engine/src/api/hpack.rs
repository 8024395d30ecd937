//! The part of HPACK (RFC 7541) the client port's authority fix needs: a decoder that follows a
//! client's header compression state, and an encoder that writes header fields as literals
//! without indexing (so the fix never adds to the server's compression state and never has to
//! keep a second table in step with the client's).
//!
//! Only what a server reads from clients is here; nothing is Huffman-encoded on the way out.

use std::collections::VecDeque;

/// Why a header block could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HpackError {
    /// The block ended inside a field.
    #[error("header block ends inside a field")]
    Truncated,
    /// An integer does not fit the decoder's range.
    #[error("integer overflow in a header block")]
    Overflow,
    /// A field refers to a table entry that does not exist.
    #[error("header table index {0} out of range")]
    BadIndex(usize),
    /// A Huffman-coded string is malformed (padding longer than 7 bits, not all ones, or EOS).
    #[error("malformed Huffman string")]
    BadHuffman,
    /// A dynamic table size update above the size the server allows, or after a field.
    #[error("bad dynamic table size update")]
    BadSizeUpdate,
}

/// RFC 7541 Appendix A, entries 1 to 61.
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// RFC 7541 Appendix B: the Huffman code length of each octet. The code is canonical (codes
/// of one length are consecutive, in symbol order), so the lengths define it; EOS (symbol 256)
/// is 30 bits of ones.
const HUFFMAN_LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12,
    10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6,
    5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22,
    22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20,
    22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27, 27, 27, 27, 26,
];

/// Longest Huffman code (EOS's).
const MAX_CODE_BITS: usize = 30;

/// The canonical code's decoding tables: for each length, the first code of that length and
/// where its symbols start in `symbols` (sorted by length, then octet).
#[derive(Debug)]
struct Canonical {
    first_code: [u32; MAX_CODE_BITS + 1],
    count: [u32; MAX_CODE_BITS + 1],
    start: [u32; MAX_CODE_BITS + 1],
    symbols: [u8; 256],
}

const fn canonical() -> Canonical {
    let mut count = [0u32; MAX_CODE_BITS + 1];
    let mut i = 0;
    while i < 256 {
        count[HUFFMAN_LENGTHS[i] as usize] += 1;
        i += 1;
    }
    let mut first_code = [0u32; MAX_CODE_BITS + 1];
    let mut start = [0u32; MAX_CODE_BITS + 1];
    let mut code = 0u32;
    let mut placed = 0u32;
    let mut len = 1;
    while len <= MAX_CODE_BITS {
        code <<= 1;
        first_code[len] = code;
        start[len] = placed;
        code += count[len];
        placed += count[len];
        len += 1;
    }
    let mut symbols = [0u8; 256];
    let mut next = start;
    let mut sym = 0;
    while sym < 256 {
        let l = HUFFMAN_LENGTHS[sym] as usize;
        symbols[next[l] as usize] = sym as u8;
        next[l] += 1;
        sym += 1;
    }
    Canonical { first_code, count, start, symbols }
}

static HUFFMAN: Canonical = canonical();

/// Decodes a Huffman-coded string (RFC 7541 §5.2).
fn huffman_decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let h = &HUFFMAN;
    let mut code = 0u32;
    let mut len = 0usize;
    for &byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            let offset = code.wrapping_sub(h.first_code[len]);
            if offset < h.count[len] {
                out.push(h.symbols[(h.start[len] + offset) as usize]);
                code = 0;
                len = 0;
            } else if len == MAX_CODE_BITS {
                // Only EOS is left at this length, and a string must not contain it.
                return Err(HpackError::BadHuffman);
            }
        }
    }
    // What is left is padding: at most 7 bits, all ones (a prefix of EOS).
    if len > 7 || code != (1 << len) - 1 {
        return Err(HpackError::BadHuffman);
    }
    Ok(())
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 §5.1) at `*pos`.
fn read_int(src: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    let mask = (1usize << n) - 1;
    let first = *src.get(*pos).ok_or(HpackError::Truncated)? as usize & mask;
    *pos += 1;
    if first < mask {
        return Ok(first);
    }
    let mut value = mask;
    let mut shift = 0u32;
    loop {
        let b = *src.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        if shift > 28 {
            return Err(HpackError::Overflow);
        }
        value += ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal (RFC 7541 §5.2) at `*pos`.
fn read_string(src: &[u8], pos: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huffman = src.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = read_int(src, pos, 7)?;
    let end = pos.checked_add(len).filter(|&e| e <= src.len()).ok_or(HpackError::Truncated)?;
    let raw = &src[*pos..end];
    *pos = end;
    if huffman {
        let mut out = Vec::with_capacity(len * 8 / 5);
        huffman_decode(raw, &mut out)?;
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

/// Writes an integer with an `n`-bit prefix whose other bits are `flags`.
fn write_int(out: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// One decoded header field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field name (lower case, as HTTP/2 requires).
    pub name: Vec<u8>,
    /// The field value.
    pub value: Vec<u8>,
}

impl Field {
    /// The field's size in the dynamic table (RFC 7541 §4.1).
    fn size(&self) -> usize {
        32 + self.name.len() + self.value.len()
    }
}

/// Follows one connection's header compression state as the server's decoder does.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first: entry 62 is `table[0]`.
    table: VecDeque<Field>,
    size: usize,
    max_size: usize,
    /// The largest table the server allows (its SETTINGS_HEADER_TABLE_SIZE).
    allowed: usize,
}

impl Decoder {
    /// A decoder for a connection whose server allows a dynamic table of `allowed` bytes.
    pub fn new(allowed: usize) -> Self {
        Self { table: VecDeque::new(), size: 0, max_size: allowed, allowed }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(f) = self.table.pop_back() else { break };
            self.size -= f.size();
        }
    }

    fn insert(&mut self, f: Field) {
        let s = f.size();
        self.evict_to(self.max_size.saturating_sub(s));
        if s <= self.max_size {
            self.size += s;
            self.table.push_front(f);
        }
    }

    /// Returns entry `index`'s name and value, borrowed (the static table or the dynamic one).
    fn entry_ref(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::BadIndex(0)),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => {
                let f = self.table.get(index - 62).ok_or(HpackError::BadIndex(index))?;
                Ok((&f.name, &f.value))
            }
        }
    }

    /// Walks a whole header block, updating the table as the server's decoder will, and calls
    /// `visit` with each field's name and value. Indexed fields are not copied.
    ///
    /// # Errors
    /// A malformed block; the table is then out of step and the connection must end.
    pub fn visit(&mut self, block: &[u8], mut visit: impl FnMut(&[u8], &[u8])) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut any = false;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                let i = read_int(block, &mut pos, 7)?;
                let (n, v) = self.entry_ref(i)?;
                visit(n, v);
                any = true;
            } else if b & 0xe0 == 0x20 {
                if any {
                    return Err(HpackError::BadSizeUpdate);
                }
                let max = read_int(block, &mut pos, 5)?;
                if max > self.allowed {
                    return Err(HpackError::BadSizeUpdate);
                }
                self.max_size = max;
                self.evict_to(max);
            } else {
                // Literal: with incremental indexing (01xxxxxx, 6-bit index), or without / never
                // indexed (0000xxxx / 0001xxxx, 4-bit index).
                let indexing = b & 0xc0 == 0x40;
                let prefix = if indexing { 6 } else { 4 };
                let i = read_int(block, &mut pos, prefix)?;
                let name = if i == 0 { read_string(block, &mut pos)? } else { self.entry_ref(i)?.0.to_vec() };
                let value = read_string(block, &mut pos)?;
                visit(&name, &value);
                any = true;
                if indexing {
                    self.insert(Field { name, value });
                }
            }
        }
        Ok(())
    }

    /// Decodes a whole header block into its fields (see [`Decoder::visit`]).
    ///
    /// # Errors
    /// A malformed block.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut fields = Vec::new();
        self.visit(block, |n, v| fields.push(Field { name: n.to_vec(), value: v.to_vec() }))?;
        Ok(fields)
    }
}

/// Encodes `fields` as literals without indexing: the name by its static table index when it
/// has one, the strings as they are.
pub fn encode_literals(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.name.len() + f.value.len() + 4).sum());
    for f in fields {
        match STATIC_TABLE.iter().position(|(n, _)| n.as_bytes() == f.name.as_slice()) {
            Some(i) => write_int(&mut out, 0x00, 4, i + 1),
            None => {
                out.push(0x00);
                write_int(&mut out, 0x00, 7, f.name.len());
                out.extend_from_slice(&f.name);
            }
        }
        write_int(&mut out, 0x00, 7, f.value.len());
        out.extend_from_slice(&f.value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
    }

    fn field(n: &str, v: &str) -> Field {
        Field { name: n.as_bytes().to_vec(), value: v.as_bytes().to_vec() }
    }

    /// RFC 7541 C.4: three requests with Huffman coding, sharing one dynamic table.
    #[test]
    fn rfc_7541_c4_requests_with_huffman() {
        let mut d = Decoder::new(4096);
        let first = d.decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")).expect("first");
        assert_eq!(
            first,
            vec![
                field(":method", "GET"),
                field(":scheme", "http"),
                field(":path", "/"),
                field(":authority", "www.example.com")
            ]
        );
        let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).expect("second");
        assert_eq!(second[3], field(":authority", "www.example.com"), "62 is the first block's authority");
        assert_eq!(second[4], field("cache-control", "no-cache"));
        let third = d.decode(&hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")).expect("third");
        assert_eq!(third[2], field(":path", "/index.html"));
        assert_eq!(third[3], field(":authority", "www.example.com"), "now 63");
        assert_eq!(third[4], field("custom-key", "custom-value"));
        assert_eq!(d.size, 164, "the table's size after C.4.3");
    }

    /// RFC 7541 C.5.2's eviction, with a 256-byte table.
    #[test]
    fn eviction_keeps_the_table_in_step() {
        let mut d = Decoder::new(256);
        d.decode(&hex("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")).expect("c.5.1");
        assert_eq!(d.size, 222);
        d.decode(&hex("4803 3330 37c1 c0bf")).expect("c.5.2");
        assert_eq!(d.size, 222, "':status: 307' evicted ':status: 302'");
        assert_eq!(d.entry_ref(62).expect("62").1, b"307");
        assert_eq!(d.entry_ref(66).err(), Some(HpackError::BadIndex(66)));
    }

    #[test]
    fn literals_round_trip_and_leave_no_state() {
        let fields = vec![field(":authority", "127.0.0.1:2379"), field("x-odd", "v"), field(":path", "/a")];
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&encode_literals(&fields)).expect("decode"), fields);
        assert_eq!(d.size, 0);
        let long = field("k", &"x".repeat(300));
        assert_eq!(d.decode(&encode_literals(std::slice::from_ref(&long))).expect("long"), vec![long]);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&hex("41 8c f1e3")), Err(HpackError::Truncated));
        assert_eq!(Decoder::new(4096).decode(&hex("3fe1 3f")), Err(HpackError::BadSizeUpdate), "above 4096");
        assert_eq!(Decoder::new(4096).decode(&hex("82 20")), Err(HpackError::BadSizeUpdate), "after a field");
        assert_eq!(Decoder::new(4096).decode(&hex("04 81 00")), Err(HpackError::BadHuffman), "padding of zeros");
        assert_eq!(Decoder::new(4096).decode(&hex("ff ff ff ff ff ff 0f")), Err(HpackError::Overflow));
    }
}
