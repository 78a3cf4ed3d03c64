//! One element of a request's list of objects (`inputs`, `outputs`), read
//! in the first pass ([`super::raw_request`]): an object's known fields,
//! or why it is not one validation can read. A fault is the element's
//! value, not a reading error, so that validation reports it in its fixed
//! order ([`super::request`]).

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Why an element of `inputs` or `outputs` cannot be read as one.
pub(crate) enum ElementFault {
    /// An object with a field given twice.
    Duplicate(&'static str),
    /// Not an object.
    NotObject,
}

/// An element as read: its object, or its fault.
pub(crate) type Slot<T> = Result<T, ElementFault>;

/// How one kind of element object is read.
pub(crate) trait ObjectReader<'de> {
    /// The object's fields as read.
    type Object;

    /// What the element should be, for serde's messages.
    fn expecting(&self) -> &'static str;

    /// Reads the object's entries.
    fn read<A: MapAccess<'de>>(self, map: A) -> Result<Slot<Self::Object>, A::Error>;
}

/// A seed for one element: an object read by `R`, anything else read to
/// its end and given as [`ElementFault::NotObject`].
pub(crate) struct Element<R>(pub R);

impl<'de, R: ObjectReader<'de>> DeserializeSeed<'de> for Element<R> {
    type Value = Slot<R::Object>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, R: ObjectReader<'de>> Visitor<'de> for Element<R> {
    type Value = Slot<R::Object>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.expecting())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.read(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(ElementFault::NotObject))
    }
}

/// Which of an object's `N` known fields were given, and the first one
/// given twice.
pub(crate) struct Seen<const N: usize> {
    given: [bool; N],
    duplicate: Option<&'static str>,
}

impl<const N: usize> Seen<N> {
    /// No field given yet.
    pub fn new() -> Self {
        Seen { given: [false; N], duplicate: None }
    }

    /// Whether known field `index` (`field`) is to be read now: not when
    /// it was given before, nor once any field was (the rest of the object
    /// is then skipped: the element is a fault whatever follows).
    pub fn first(&mut self, index: usize, field: &'static str) -> bool {
        let again = self.given.get_mut(index).is_none_or(|given| std::mem::replace(given, true));
        if again || self.duplicate.is_some() {
            self.duplicate = self.duplicate.or(Some(field));
            return false;
        }
        true
    }

    /// The object read, or the fault of a field given twice.
    pub fn slot<T>(self, object: T) -> Slot<T> {
        match self.duplicate {
            Some(field) => Err(ElementFault::Duplicate(field)),
            None => Ok(object),
        }
    }
}
