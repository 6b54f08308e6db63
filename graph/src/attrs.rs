//! Operator attributes in the graph JSON format.
//!
//! In memory an op's attributes are a [`tdl::Attrs`] map (name → int or real,
//! exactly what [`tdl::OpSpec::bind`] takes). In JSON they are an object of
//! plain numbers: an `int` attribute is written without a decimal point (`2`),
//! a `float` attribute always with one or an exponent (`0.5`, `1.0`, `1e-5`),
//! so the kind survives the round trip. JSON has no infinities: ±inf (a
//! one-sided clamp's bound, ONNX `Clip` with `max = inf`) is written as the
//! string `"inf"` / `"-inf"`; NaN is never written (the builder rejects it).

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserializer, Serializer};
use tdl::{AttrValue, Attrs};

/// Serialize an attribute map as `{"name": number, ...}`.
pub fn serialize<S: Serializer>(attrs: &Attrs, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(attrs.len()))?;
    for (k, v) in attrs {
        match v {
            AttrValue::Int(i) => m.serialize_entry(k, i)?,
            AttrValue::Float(f) if f.is_infinite() => {
                m.serialize_entry(k, if *f > 0.0 { "inf" } else { "-inf" })?
            }
            AttrValue::Float(f) => m.serialize_entry(k, f)?,
        }
    }
    m.end()
}

/// Deserialize an attribute map written by [`serialize`].
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Attrs, D::Error> {
    d.deserialize_map(AttrsVisitor)
}

struct AttrsVisitor;

impl<'de> Visitor<'de> for AttrsVisitor {
    type Value = Attrs;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of attribute values (numbers)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Attrs, A::Error> {
        let mut out = Attrs::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value_seed(ValueSeed)?;
            if out.insert(k.clone(), v).is_some() {
                return Err(de::Error::custom(format!("attribute `{k}` is given twice")));
            }
        }
        Ok(out)
    }
}

struct ValueSeed;

impl<'de> de::DeserializeSeed<'de> for ValueSeed {
    type Value = AttrValue;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AttrValue, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl Visitor<'_> for ValueVisitor {
    type Value = AttrValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a number (integer for an int attribute, with a decimal point for a float one) or \"inf\" / \"-inf\"",
        )
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<AttrValue, E> {
        Ok(AttrValue::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<AttrValue, E> {
        i64::try_from(v)
            .map(AttrValue::Int)
            .map_err(|_| E::custom(format!("integer attribute {v} does not fit in i64")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<AttrValue, E> {
        Ok(AttrValue::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<AttrValue, E> {
        match v {
            "inf" => Ok(AttrValue::Float(f64::INFINITY)),
            "-inf" => Ok(AttrValue::Float(f64::NEG_INFINITY)),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}
