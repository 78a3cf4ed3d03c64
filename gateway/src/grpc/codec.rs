//! The codec of every call of the gRPC listener (the generated service
//! uses it through `codec_path` in `build.rs`): prost, with two changes
//! on the decoding side.
//!
//! - Each message is checked on the wire before it is decoded
//!   ([`super::bounds`]), so a message of empty entries is refused before
//!   prost allocates them.
//! - A message that is not valid protobuf is `INVALID_ARGUMENT` (the
//!   client's fault, as over REST a malformed body is a 400), where
//!   prost's codec says `INTERNAL`.

use super::bounds::WireBounds;
use crate::error::GatewayError;
use bytes::Buf;
use prost::Message;
use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::ProstEncoder;

/// Encodes `T` with prost; decodes `U` after [`WireBounds::check_wire`].
#[derive(Debug, Clone)]
pub struct BoundedCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        BoundedCodec { _types: PhantomData }
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + WireBounds + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder { _type: PhantomData }
    }
}

/// The decoding half of [`BoundedCodec`].
#[derive(Debug)]
pub struct BoundedDecoder<U> {
    _type: PhantomData<U>,
}

/// The start of the message of a call whose message is not protobuf.
pub const UNDECODABLE: &str = "the message is not a valid";

impl<U: Message + Default + WireBounds> Decoder for BoundedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // A message's bytes are contiguous in tonic's buffer; if they ever
        // were not, they are gathered once.
        let gathered;
        let message: &[u8] = if buf.chunk().len() == buf.remaining() {
            buf.chunk()
        } else {
            gathered = buf.copy_to_bytes(buf.remaining());
            &gathered
        };
        if let Err(e) = U::check_wire(message) {
            return Err(GatewayError::from(e).into());
        }
        let decoded = U::decode(message).map_err(|e| {
            let type_name = std::any::type_name::<U>().rsplit("::").next().unwrap_or_default();
            Status::invalid_argument(format!("{UNDECODABLE} {type_name}: {e}"))
        })?;
        let consumed = buf.remaining();
        buf.advance(consumed);
        Ok(Some(decoded))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}
