//! The fast reading of one message: the top-level object's members found,
//! each value skipped over while it is checked to be valid JSON, its raw
//! text kept. serde_json does the same work one byte and one token at a
//! time, which large answers (blocks full of strings) pay for. Here the
//! quotes, backslashes and control bytes of 64 bytes at a time are found
//! with SSE2 into one mask, so most strings end at a bit already found
//! rather than in a loop of their own. Why this is worth its code, in
//! figures: docs/performance-history.md, "rpc/skim".
//!
//! Its verdict is serde_json's on every UTF-8 input (`fuzz/fuzz_targets/message.rs`
//! and the tests below compare them). A body that is not UTF-8 it refuses,
//! as RFC 8259 asks, where serde_json lets bad bytes through in members it
//! skips. What it does not read itself, it leaves to serde_json by
//! answering [`Skimmed::Unsure`]: a body that is not an object, a member
//! name with an escape, nesting deeper than [`MAX_DEPTH`].

use super::wire::Message;

/// What the fast reading made of a body.
#[derive(Debug)]
pub enum Skimmed<'a> {
    Message(Message<'a>),
    /// Not UTF-8, or serde_json would refuse it too.
    Invalid,
    /// Not read here: serde_json must decide.
    Unsure,
}

/// Arrays and objects nested deeper than this are left to serde_json, so
/// the stack of open containers is four words on the machine's stack.
pub const MAX_DEPTH: usize = 256;

/// Reads `body` as one JSON object with a message's members.
pub fn message(body: &[u8]) -> Skimmed<'_> {
    // simdutf8: 0.8 µs for the block above where `std::str::from_utf8`
    // takes 2 µs.
    let Ok(text) = simdutf8::basic::from_utf8(body) else {
        return Skimmed::Invalid;
    };
    let mut reader = Reader::new(text);
    let mut i = reader.whitespace(0);
    if body.get(i) != Some(&b'{') {
        return Skimmed::Unsure;
    }
    let mut msg = Message::default();
    i = reader.whitespace(i + 1);
    if body.get(i) == Some(&b'}') {
        return reader.end(msg, i + 1);
    }
    loop {
        // A member: its name, a colon, its value.
        let Some((name_end, start)) = reader.member_name(i) else {
            return Skimmed::Invalid;
        };
        let name = &body[i + 1..name_end - 1];
        if name.contains(&b'\\') {
            return Skimmed::Unsure;
        }
        let end = match reader.value(start) {
            Ok(Some(end)) => end,
            Ok(None) => return Skimmed::Invalid,
            Err(TooDeep) => return Skimmed::Unsure,
        };
        if !msg.keep(name, &text[start..end]) {
            return Skimmed::Invalid;
        }
        i = reader.whitespace(end);
        match body.get(i) {
            Some(b',') => i = reader.whitespace(i + 1),
            Some(b'}') => return reader.end(msg, i + 1),
            _ => return Skimmed::Invalid,
        }
    }
}

impl<'a> Message<'a> {
    /// Keeps a member the message knows; false for one seen twice, which
    /// serde refuses as a duplicate field. Other members are skipped.
    fn keep(&mut self, name: &[u8], raw: &'a str) -> bool {
        let slot = match name {
            b"jsonrpc" => &mut self.jsonrpc,
            b"method" => &mut self.method,
            b"params" => &mut self.params,
            b"result" => &mut self.result,
            b"error" => &mut self.error,
            b"id" => &mut self.id,
            _ => return true,
        };
        slot.replace(raw).is_none()
    }
}

/// Nesting past [`MAX_DEPTH`].
struct TooDeep;

/// The body and a window onto where its next stops lie.
struct Reader<'a> {
    text: &'a str,
    stops: Stops,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader {
            text,
            stops: Stops::default(),
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Only whitespace may follow the object.
    fn end(&self, msg: Message<'a>, i: usize) -> Skimmed<'a> {
        match self.bytes().get(self.whitespace(i)..) {
            Some([]) => Skimmed::Message(msg),
            _ => Skimmed::Invalid,
        }
    }

    /// The index of the first byte at or after `i` that is not JSON
    /// whitespace.
    fn whitespace(&self, mut i: usize) -> usize {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes().get(i) {
            i += 1;
        }
        i
    }

    /// Skips the string whose opening quote is just before `i`; the index
    /// past its closing quote, or `None` where it is not a valid string.
    fn string(&mut self, mut i: usize) -> Option<usize> {
        let bytes = self.bytes();
        loop {
            i = self.stops.next(bytes, i);
            match *bytes.get(i)? {
                b'"' => return Some(i + 1),
                b'\\' => i = escape(bytes, i + 1)?,
                _ => return None, // a control byte
            }
        }
    }

    /// Skips the value that starts at `i` (whitespace already skipped): the
    /// index just past it, `None` where it is not valid JSON.
    fn value(&mut self, mut i: usize) -> Result<Option<usize>, TooDeep> {
        let bytes = self.bytes();
        let mut open = Containers::default();
        loop {
            // A value starts at `i`.
            let Some(&first) = bytes.get(i) else {
                return Ok(None);
            };
            match first {
                b'"' => match self.string(i + 1) {
                    Some(end) => i = end,
                    None => return Ok(None),
                },
                b'{' | b'[' => {
                    let object = first == b'{';
                    open.push(object)?;
                    i = self.whitespace(i + 1);
                    let close = if object { b'}' } else { b']' };
                    if bytes.get(i) == Some(&close) {
                        open.pop();
                        i += 1;
                    } else {
                        if object {
                            match self.member_name(i) {
                                Some((_, next)) => i = next,
                                None => return Ok(None),
                            }
                        }
                        continue;
                    }
                }
                b't' | b'f' | b'n' => match literal(bytes, i) {
                    Some(end) => i = end,
                    None => return Ok(None),
                },
                b'-' | b'0'..=b'9' => match number(bytes, i) {
                    Some(end) => i = end,
                    None => return Ok(None),
                },
                _ => return Ok(None),
            }
            // After a value: close what it ends, or go on past a comma.
            match self.after_value(&mut open, i) {
                Some(After::Done(end)) => return Ok(Some(end)),
                Some(After::Next(next)) => i = next,
                None => return Ok(None),
            }
        }
    }

    /// Past the closing brackets that follow a value, and past the comma
    /// (and in an object the next member's name and colon) if one follows.
    fn after_value(&mut self, open: &mut Containers, mut i: usize) -> Option<After> {
        let bytes = self.bytes();
        loop {
            let Some(object) = open.innermost() else {
                return Some(After::Done(i));
            };
            i = self.whitespace(i);
            match (bytes.get(i)?, object) {
                (b',', false) => return Some(After::Next(self.whitespace(i + 1))),
                (b',', true) => {
                    let name = self.whitespace(i + 1);
                    return self.member_name(name).map(|(_, next)| After::Next(next));
                }
                (b'}', true) | (b']', false) => {
                    open.pop();
                    i += 1;
                }
                _ => return None,
            }
        }
    }

    /// A member's name at `i`, its colon and the whitespace after: the
    /// index past the name's closing quote, and where its value starts.
    fn member_name(&mut self, i: usize) -> Option<(usize, usize)> {
        if self.bytes().get(i) != Some(&b'"') {
            return None;
        }
        let name_end = self.string(i + 1)?;
        let colon = self.whitespace(name_end);
        (self.bytes().get(colon) == Some(&b':')).then(|| (name_end, self.whitespace(colon + 1)))
    }
}

enum After {
    /// The outermost value ended here.
    Done(usize),
    /// The next value starts here.
    Next(usize),
}

/// Which of the open containers are objects, innermost last.
#[derive(Default)]
struct Containers {
    objects: [u64; MAX_DEPTH / 64],
    depth: usize,
}

impl Containers {
    fn push(&mut self, object: bool) -> Result<(), TooDeep> {
        let (word, bit) = (self.depth / 64, self.depth % 64);
        let slot = self.objects.get_mut(word).ok_or(TooDeep)?;
        *slot = (*slot & !(1 << bit)) | (u64::from(object) << bit);
        self.depth += 1;
        Ok(())
    }

    fn pop(&mut self) {
        self.depth -= 1;
    }

    /// Whether the innermost open container is an object; `None` when none
    /// is open.
    fn innermost(&self) -> Option<bool> {
        let d = self.depth.checked_sub(1)?;
        Some(self.objects[d / 64] >> (d % 64) & 1 == 1)
    }
}

/// Past the escape whose backslash is just before `i`.
fn escape(bytes: &[u8], i: usize) -> Option<usize> {
    match *bytes.get(i)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(i + 1),
        // Any four hex digits: serde_json, skipping, asks no more of them.
        b'u' => bytes
            .get(i + 1..i + 5)?
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then_some(i + 5),
        _ => None,
    }
}

fn literal(bytes: &[u8], i: usize) -> Option<usize> {
    let word: &[u8] = match bytes[i] {
        b't' => b"true",
        b'f' => b"false",
        _ => b"null",
    };
    (bytes.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// Past the number that starts at `i`: RFC 8259's grammar, no more (what
/// follows it is the container's to judge).
fn number(bytes: &[u8], mut i: usize) -> Option<usize> {
    if bytes[i] == b'-' {
        i += 1;
    }
    match *bytes.get(i)? {
        // A leading 0 stands alone: a digit after it ("01") is then no
        // byte a container takes after a value, so the text is refused.
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(bytes, i),
        _ => return None,
    }
    if bytes.get(i) == Some(&b'.') {
        i = at_least_one_digit(bytes, i + 1)?;
    }
    if let Some(b'e' | b'E') = bytes.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = bytes.get(i) {
            i += 1;
        }
        i = at_least_one_digit(bytes, i)?;
    }
    Some(i)
}

fn digits(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

fn at_least_one_digit(bytes: &[u8], i: usize) -> Option<usize> {
    let end = digits(bytes, i);
    (end > i).then_some(end)
}

/// Where the next quote, backslash or control byte lies: a mask of them
/// over the 64 bytes from `base`, found at once and kept while the reading
/// stays inside those bytes.
#[derive(Default)]
struct Stops {
    base: usize,
    mask: u64,
}

impl Stops {
    /// The index of the first stop at or after `i`; an index at or past the
    /// end of `bytes` when there is none.
    #[inline]
    fn next(&mut self, bytes: &[u8], i: usize) -> usize {
        if let Some(offset) = i.checked_sub(self.base).filter(|&o| o < 64) {
            let ahead = self.mask >> offset;
            if ahead != 0 {
                return i + ahead.trailing_zeros() as usize;
            }
        }
        self.refill(bytes, i)
    }

    #[inline(never)]
    fn refill(&mut self, bytes: &[u8], mut i: usize) -> usize {
        loop {
            self.base = i;
            self.mask = match bytes.get(i..i + 64) {
                Some(block) => block_mask(block.try_into().expect("64 bytes")),
                None => {
                    // The last bytes, padded with a control byte: a stop at
                    // or past the end, which the reader finds is no byte.
                    let rest = bytes.get(i..).unwrap_or_default();
                    let mut padded = [0u8; 64];
                    padded[..rest.len()].copy_from_slice(rest);
                    block_mask(&padded)
                }
            };
            if self.mask != 0 {
                return i + self.mask.trailing_zeros() as usize;
            }
            i += 64;
        }
    }
}

/// Bit `k` set where `block[k]` is a quote, a backslash or below 0x20.
#[cfg(target_arch = "x86_64")]
fn block_mask(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut mask = 0;
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of every x86_64; the load reads the 16
        // bytes of `chunk`, and `loadu` needs no alignment.
        let bits = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Below 0x20 exactly where the unsigned max with 0x1f is 0x1f.
            let low = _mm_set1_epi8(0x1f);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        };
        mask |= u64::from(bits as u16) << (k * 16);
    }
    mask
}

/// The same, a byte at a time: where SSE2 is not there to ask, and what
/// the SSE2 reading is tested against.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn block_mask_bytewise(block: &[u8; 64]) -> u64 {
    block.iter().enumerate().fold(0, |mask, (k, &b)| {
        mask | u64::from(b == b'"' || b == b'\\' || b < 0x20) << k
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn block_mask(block: &[u8; 64]) -> u64 {
    block_mask_bytewise(block)
}

#[cfg(test)]
mod tests;
