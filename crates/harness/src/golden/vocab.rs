//! The serde spellings of the library's [`Method`] and [`NginxVersion`] in records and fixtures (the flags
//! are [`crate::catalog::flag`]'s, the observations [`crate::run::observation`]'s). Every spelling here is the
//! on-disk one; changing one changes the files.

use nginx_ketama::upstream::Method;
use nginx_ketama::version::NginxVersion;
use serde::{Deserialize, Serialize};

/// The serde spelling of the library's [`Method`]: `consistent` or `plain`.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Method", rename_all = "lowercase")]
pub(crate) enum MethodDef {
    Consistent,
    Plain,
}

/// A [`Method`] as its record spelling (`consistent`, `plain`), for file names and text.
pub fn method_name(m: Method) -> &'static str {
    m.as_str()
}

/// The serde spelling of [`NginxVersion`]: its `MAJOR.MINOR.PATCH` text. Use with `#[serde(with = …)]`.
pub(crate) mod nginx_version {
    use super::NginxVersion;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &NginxVersion, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NginxVersion, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }

    /// A list of versions (serialize only).
    pub(crate) fn serialize_all<S: Serializer>(vs: &[NginxVersion], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(vs.iter().map(ToString::to_string))
    }
}
