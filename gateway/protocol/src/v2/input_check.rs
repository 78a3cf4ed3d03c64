//! One input's name, datatype and shape against the model's signature:
//! what the full check ([`super::check_signature`]) does for each input,
//! and what the decoder does before it decodes an input's data
//! ([`super::DecodeLimits::signature`]). A leaf: it knows the signature
//! and the error, not the decoded request.

use switchyard_runtime::signature::ModelSignature;
use switchyard_runtime::DataType;

use super::error::V2Error;

/// Checks one input, `name` of `dtype` and `shape`, against `signature`
/// of model (route) `model`, as [`check_signature`] does for each input;
/// the decoder calls it before it decodes the input's data
/// ([`super::DecodeLimits::signature`]).
pub fn check_input(
    name: &str,
    dtype: DataType,
    shape: &[usize],
    model: &str,
    signature: &ModelSignature,
) -> Result<(), V2Error> {
    let Some(spec) = signature.input(name) else {
        return Err(V2Error::UnknownInput { input: name.to_owned(), model: model.to_owned() });
    };
    if spec.dtype != dtype {
        return Err(V2Error::DatatypeMismatch {
            input: name.to_owned(),
            model: model.to_owned(),
            expected: spec.dtype.v2_name(),
            actual: dtype.v2_name(),
        });
    }
    let fits = column_reshape(&spec.shape, shape).is_some()
        || spec.shape.len() == shape.len()
            && spec.shape.iter().zip(shape).all(|(&want, &got)| want < 0 || i64::try_from(got) == Ok(want));
    if !fits {
        return Err(V2Error::InputShape {
            input: name.to_owned(),
            model: model.to_owned(),
            expected: spec.shape.clone(),
            actual: shape.to_vec(),
        });
    }
    Ok(())
}

/// The declared shape `shape` should take: `[N]` for `[N, 1]` sent to a
/// `[-1]` input, `[N, 1]` for `[N]` sent to a `[-1, 1]` input; `None` when
/// neither applies.
pub fn column_reshape(spec: &[i64], shape: &[usize]) -> Option<Vec<usize>> {
    match (spec, shape) {
        ([d], [n, 1]) if *d < 0 => Some(vec![*n]),
        ([d, 1], [n]) if *d < 0 => Some(vec![*n, 1]),
        _ => None,
    }
}
