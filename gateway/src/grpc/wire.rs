//! The protobuf wire format, read field by field without decoding
//! anything: enough to count a message's repeated fields before prost
//! allocates them ([`super::bounds`]).
//!
//! A message is a sequence of fields, each a key (a varint holding the
//! field number and the wire type) and a value: a varint, 8 or 4 fixed
//! bytes, or a length-prefixed run of bytes (strings, bytes, embedded
//! messages, packed repeated scalars). Groups (wire types 3 and 4, long
//! deprecated, unused by the inference protocol) are reported as
//! malformed.

/// One field's value, as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0: a varint.
    Varint(u64),
    /// Wire type 1: eight bytes.
    Fixed64,
    /// Wire type 2: a length-delimited run of bytes.
    Bytes(&'a [u8]),
    /// Wire type 5: four bytes.
    Fixed32,
}

/// A message that is not valid protobuf wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// The fields of a message, in wire order.
pub struct Fields<'a> {
    rest: &'a [u8],
}

/// Iterates over `message`'s fields; the first malformed one ends the
/// iteration with `Err(Malformed)`.
pub fn fields(message: &[u8]) -> Fields<'_> {
    Fields { rest: message }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u32, WireValue<'a>), Malformed> {
        let key = varint(&mut self.rest)?;
        let number = u32::try_from(key >> 3).map_err(|_| Malformed)?;
        let value = match key & 7 {
            0 => WireValue::Varint(varint(&mut self.rest)?),
            1 => {
                self.rest = self.rest.get(8..).ok_or(Malformed)?;
                WireValue::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(&mut self.rest)?).map_err(|_| Malformed)?;
                if len > self.rest.len() {
                    return Err(Malformed);
                }
                let (value, rest) = self.rest.split_at(len);
                self.rest = rest;
                WireValue::Bytes(value)
            }
            5 => {
                self.rest = self.rest.get(4..).ok_or(Malformed)?;
                WireValue::Fixed32
            }
            _ => return Err(Malformed),
        };
        Ok((number, value))
    }
}

/// Reads one varint off the front of `buf` (at most ten bytes).
pub fn varint(buf: &mut &[u8]) -> Result<u64, Malformed> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Ok(value);
        }
    }
    Err(Malformed)
}

/// The number of varints in a packed run (each ends with a byte below
/// 0x80).
pub fn packed_varints(run: &[u8]) -> usize {
    run.iter().filter(|&&b| b & 0x80 == 0).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_wire_type() {
        // field 1 varint 300, field 2 bytes "hi", field 3 fixed64, field 4 fixed32
        let message =
            [0x08, 0xac, 0x02, 0x12, 0x02, b'h', b'i', 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4];
        let read: Vec<_> = fields(&message).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            read,
            [
                (1, WireValue::Varint(300)),
                (2, WireValue::Bytes(b"hi")),
                (3, WireValue::Fixed64),
                (4, WireValue::Fixed32)
            ]
        );
    }

    #[test]
    fn truncated_and_grouped_messages_are_malformed() {
        assert_eq!(fields(&[0x12, 0x05, b'a']).next(), Some(Err(Malformed)), "length past the end");
        assert_eq!(fields(&[0x08]).next(), Some(Err(Malformed)), "varint cut off");
        assert_eq!(fields(&[0x0b]).next(), Some(Err(Malformed)), "group start");
        assert_eq!(fields(&[0x80; 11]).next(), Some(Err(Malformed)), "varint of 11 bytes");
        let mut it = fields(&[0x19, 1, 2]);
        assert_eq!(it.next(), Some(Err(Malformed)), "fixed64 cut off");
        assert_eq!(it.next(), None, "nothing after the error");
    }

    #[test]
    fn packed_varints_are_counted() {
        assert_eq!(packed_varints(&[0x01, 0xac, 0x02, 0x7f]), 3);
        assert_eq!(packed_varints(&[]), 0);
    }
}
