//! How much work a request body would be to decode, found before decoding it: one pass of
//! serde_json that counts values and nesting and keeps nothing. A body within the size limit
//! can still be a million empty arrays, or arrays nested until a recursive decoder (ours, the
//! schema check, a plugin's) runs out of stack.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Why a body is refused before it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TooComplex {
    /// More values (scalars, arrays and objects, each counted once) than the limit.
    #[error("the request holds more than {max} JSON values")]
    TooManyValues { max: usize },
    /// Arrays and objects nested deeper than the limit.
    #[error("the request nests JSON arrays and objects deeper than {max} levels")]
    TooDeep { max: usize },
}

/// Checks that `body` holds at most `max_values` JSON values nested at most `max_depth`
/// deep. A body that is not JSON passes: decoding it says what is wrong with it.
///
/// # Errors
/// The first limit the body goes beyond.
pub fn check(body: &[u8], max_values: usize, max_depth: usize) -> Result<(), TooComplex> {
    let mut scan = Scan {
        values: 0,
        max_values,
        max_depth,
        exceeded: None,
    };
    let mut json = serde_json::Deserializer::from_slice(body);
    // The scan stops at the first limit with an error of its own, or at a syntax error.
    let _ = Node {
        scan: &mut scan,
        depth: 0,
    }
    .deserialize(&mut json);
    scan.exceeded.map_or(Ok(()), Err)
}

struct Scan {
    values: usize,
    max_values: usize,
    max_depth: usize,
    exceeded: Option<TooComplex>,
}

/// One value of the body, `depth` arrays and objects deep.
struct Node<'a> {
    scan: &'a mut Scan,
    depth: usize,
}

impl Node<'_> {
    fn count<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.scan.values += 1;
        if self.scan.values > self.scan.max_values {
            return Err(self.exceed(TooComplex::TooManyValues {
                max: self.scan.max_values,
            }));
        }
        Ok(())
    }

    /// Counts an array or object and returns the depth of its members.
    fn enter<E: serde::de::Error>(&mut self) -> Result<usize, E> {
        self.count()?;
        let depth = self.depth + 1;
        if depth > self.scan.max_depth {
            return Err(self.exceed(TooComplex::TooDeep {
                max: self.scan.max_depth,
            }));
        }
        Ok(depth)
    }

    fn exceed<E: serde::de::Error>(&mut self, why: TooComplex) -> E {
        self.scan.exceeded = Some(why);
        E::custom(why)
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> Result<(), E> {
        self.count()
    }

    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> Result<(), E> {
        self.count()
    }

    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> Result<(), E> {
        self.count()
    }

    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> Result<(), E> {
        self.count()
    }

    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> Result<(), E> {
        self.count()
    }

    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.count()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.enter()?;
        while seq
            .next_element_seed(Node {
                scan: &mut *self.scan,
                depth,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let depth = self.enter()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Node {
                scan: &mut *self.scan,
                depth,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[rstest]
    #[case::an_admission_review(
        r#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"u","object":{"spec":{"targets":[{"name":"a"}]}}}}"#
    )]
    #[case::a_scalar("3")]
    #[case::nested_exactly_to_the_limit(&nested(100))]
    #[case::not_json_at_all("this is not JSON")]
    fn a_body_within_the_limits_passes(#[case] body: &str) {
        assert_eq!(check(body.as_bytes(), 200_000, 100), Ok(()));
    }

    #[test]
    fn arrays_nested_one_level_too_deep_are_refused_before_decoding() {
        assert_eq!(
            check(nested(101).as_bytes(), 200_000, 100),
            Err(TooComplex::TooDeep { max: 100 })
        );
    }

    #[test]
    fn objects_nested_too_deep_are_refused_even_past_serde_jsons_own_limit() {
        let body = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
        assert_eq!(
            check(body.as_bytes(), 200_000, 100),
            Err(TooComplex::TooDeep { max: 100 })
        );
    }

    #[test]
    fn a_flat_array_of_too_many_values_is_refused_counting_the_array_itself() {
        let values = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        assert_eq!(check(values(999).as_bytes(), 1000, 100), Ok(()));
        assert_eq!(
            check(values(1000).as_bytes(), 1000, 100),
            Err(TooComplex::TooManyValues { max: 1000 })
        );
    }

    #[test]
    fn the_refusal_says_which_limit_in_words() {
        assert_eq!(
            TooComplex::TooDeep { max: 100 }.to_string(),
            "the request nests JSON arrays and objects deeper than 100 levels"
        );
    }
}
