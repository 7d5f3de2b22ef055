//! The webhook's own CA and serving certificate: made with `rcgen`, read back with
//! `x509-parser`, and when to renew which, as a pure function of what the Secret holds.
//!
//! Renewal keeps the API servers trusting whatever a replica may serve: a new CA joins the
//! bundle (`ca-bundle.crt`, what the webhook configuration's `caBundle` gets) beside the old
//! one and signs nothing until the bundle is published; only then is the serving certificate
//! re-issued under it. An old CA leaves the bundle when it expires.

use std::collections::BTreeMap;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// Keys of the Secret (a `kubernetes.io/tls` Secret, with the CA beside the serving pair).
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
/// Every CA the API servers should trust: the current one first, then older ones until they
/// expire.
pub const CA_BUNDLE: &str = "ca-bundle.crt";

/// The CA's common name.
const CA_NAME: &str = "workflow-operator-webhook-ca";

/// Why certificates could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused to make a key or a certificate.
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A PEM entry of the Secret is not a certificate we can read.
    #[error("{key} is not a readable certificate: {reason}")]
    Unreadable { key: &'static str, reason: String },
}

/// How long certificates live. Each is renewed once two thirds of its life have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
}

impl Default for Lifetimes {
    /// A CA of a year, a serving certificate of 30 days.
    fn default() -> Self {
        Self {
            ca: Duration::from_secs(365 * 24 * 3600),
            serving: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// What the rotation needs to know of one certificate, times in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub not_before: i64,
    pub not_after: i64,
    /// The serial number, hex: what tells two certificates apart in logs and tests.
    pub serial: String,
    /// DNS names and IP addresses it is valid for.
    pub names: Vec<String>,
}

impl CertInfo {
    /// When it is due for renewal: two thirds of its life.
    pub fn renew_at(&self) -> i64 {
        self.not_after - (self.not_after - self.not_before) / 3
    }

    fn due(&self, now: i64) -> bool {
        now >= self.renew_at()
    }
}

/// What the Secret holds, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The current CA, when its certificate and key are both there and readable.
    pub ca: Option<CertInfo>,
    /// The serving certificate, when it and its key are there and readable.
    pub serving: Option<CertInfo>,
    /// Whether the serving certificate was signed by the current CA.
    pub serving_signed_by_ca: bool,
    /// The bundle, in order (the current CA among them).
    pub bundle: Vec<CertInfo>,
}

/// What to do with the Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renewal {
    /// Make a new CA (the current one stays in the bundle).
    pub new_ca: bool,
    /// Issue a new serving certificate under the (possibly new) current CA.
    pub new_serving: bool,
    /// Serials of expired CAs to drop from the bundle.
    pub drop_from_bundle: Vec<String>,
}

impl Renewal {
    /// Whether anything changes.
    pub fn is_empty(&self) -> bool {
        !self.new_ca && !self.new_serving && self.drop_from_bundle.is_empty()
    }
}

/// What to renew at `now`, given the Secret's content, the names the serving certificate must
/// cover, and whether the API servers already have the current CA (`ca_published`: the
/// webhook configuration's `caBundle` holds it).
///
/// # Guarantees
/// Never switches the serving certificate to a CA that is not published yet, unless no
/// serving certificate works anyway (none, or expired); never drops a CA before it expires.
pub fn plan_renewal(stored: &Stored, names: &[String], ca_published: bool, now: i64) -> Renewal {
    let serving_dead = stored.serving.as_ref().is_none_or(|s| now >= s.not_after);
    let Some(ca) = &stored.ca else {
        return Renewal {
            new_ca: true,
            new_serving: true,
            ..Renewal::default()
        };
    };
    let drop_from_bundle = stored
        .bundle
        .iter()
        .filter(|c| c.serial != ca.serial && now >= c.not_after)
        .map(|c| c.serial.clone())
        .collect();
    if ca.due(now) {
        // The old CA keeps signing the serving certificate until the new one is published.
        return Renewal {
            new_ca: true,
            new_serving: serving_dead,
            drop_from_bundle,
        };
    }
    let serving_stale = match &stored.serving {
        None => true,
        Some(s) => s.due(now) || s.names != names || !stored.serving_signed_by_ca,
    };
    Renewal {
        new_ca: false,
        new_serving: serving_dead || (serving_stale && ca_published),
        drop_from_bundle,
    }
}

/// The Secret's content after `renewal` at `now`: `data` with new certificates and keys, and
/// the bundle updated. Unchanged keys keep their bytes.
///
/// # Errors
/// A key pair or certificate could not be made, or the CA in `data` cannot sign.
pub fn renew(
    data: &BTreeMap<String, Vec<u8>>,
    renewal: &Renewal,
    names: &[String],
    lifetimes: Lifetimes,
    now: OffsetDateTime,
) -> Result<BTreeMap<String, Vec<u8>>, CertError> {
    let mut data = data.clone();
    let mut bundle = pem_certs(data.get(CA_BUNDLE).map(Vec::as_slice).unwrap_or_default());
    if renewal.new_ca {
        let key = KeyPair::generate()?;
        let cert = ca_params(lifetimes.ca, now, &key)?.self_signed(&key)?;
        data.insert(CA_CRT.into(), cert.pem().into_bytes());
        data.insert(CA_KEY.into(), key.serialize_pem().into_bytes());
        bundle.insert(0, cert.der().to_vec());
    }
    bundle.retain(|der| {
        info(der, CA_BUNDLE).is_ok_and(|c| !renewal.drop_from_bundle.contains(&c.serial))
    });
    // A bundle written by hand (or lost) still starts with the current CA.
    if let Some(ca) = data
        .get(CA_CRT)
        .and_then(|pem| pem_certs(pem).into_iter().next())
        && !bundle.contains(&ca)
    {
        bundle.insert(0, ca);
    }
    data.insert(CA_BUNDLE.into(), pem_encode(&bundle).into_bytes());
    if renewal.new_serving {
        let ca_pem = text_of(&data, CA_CRT)?;
        let ca_key = KeyPair::from_pem(&text_of(&data, CA_KEY)?)?;
        let ca_der = pem_certs(ca_pem.as_bytes()).into_iter().next();
        let ca_not_after = info(&ca_der.unwrap_or_default(), CA_CRT)?.not_after;
        let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)?;
        let key = KeyPair::generate()?;
        let params = serving_params(names, lifetimes.serving, now, ca_not_after, &key)?;
        let cert = params.signed_by(&key, &issuer)?;
        data.insert(TLS_CRT.into(), cert.pem().into_bytes());
        data.insert(TLS_KEY.into(), key.serialize_pem().into_bytes());
    }
    Ok(data)
}

fn text_of(data: &BTreeMap<String, Vec<u8>>, key: &'static str) -> Result<String, CertError> {
    data.get(key)
        .and_then(|b| String::from_utf8(b.clone()).ok())
        .ok_or(CertError::Unreadable {
            key,
            reason: "missing or not text".into(),
        })
}

/// Reads the Secret's content: what [`plan_renewal`] decides on. Anything unreadable counts
/// as missing, so that it is made anew.
pub fn read(data: &BTreeMap<String, Vec<u8>>) -> Stored {
    let first = |key: &str| {
        data.get(key)
            .and_then(|pem| pem_certs(pem).into_iter().next())
    };
    let has_key = |key: &str| {
        data.get(key)
            .and_then(|b| std::str::from_utf8(b).ok())
            .is_some_and(|pem| KeyPair::from_pem(pem).is_ok())
    };
    let ca_der = first(CA_CRT).filter(|_| has_key(CA_KEY));
    let serving_der = first(TLS_CRT).filter(|_| has_key(TLS_KEY));
    let serving_signed_by_ca = match (&ca_der, &serving_der) {
        (Some(ca), Some(serving)) => signed_by(serving, ca),
        _ => false,
    };
    Stored {
        ca: ca_der.as_deref().and_then(|d| info(d, CA_CRT).ok()),
        serving: serving_der.as_deref().and_then(|d| info(d, TLS_CRT).ok()),
        serving_signed_by_ca,
        bundle: data
            .get(CA_BUNDLE)
            .map(|pem| pem_certs(pem))
            .unwrap_or_default()
            .iter()
            .filter_map(|d| info(d, CA_BUNDLE).ok())
            .collect(),
    }
}

/// The DER certificates of a PEM text, skipping anything else.
pub fn pem_certs(pem: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .map(|c| c.to_vec())
        .collect()
}

fn pem_encode(ders: &[Vec<u8>]) -> String {
    ders.iter()
        .map(|der| {
            let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
            pem::encode_config(&pem::Pem::new("CERTIFICATE", der.clone()), config)
        })
        .collect()
}

/// What [`CertInfo`] says of a DER certificate, read from the Secret's entry `key`.
///
/// # Errors
/// It is not an X.509 certificate.
pub fn info(der: &[u8], key: &'static str) -> Result<CertInfo, CertError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|e| CertError::Unreadable {
            key,
            reason: e.to_string(),
        })?;
    let validity = cert.validity();
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    x509_parser::extensions::GeneralName::IPAddress(ip) => ip_text(ip),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CertInfo {
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
        serial: hex::encode(cert.raw_serial()),
        names,
    })
}

fn ip_text(bytes: &[u8]) -> Option<String> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes)
            .ok()
            .map(|b| std::net::Ipv4Addr::from(b).to_string()),
        16 => <[u8; 16]>::try_from(bytes)
            .ok()
            .map(|b| std::net::Ipv6Addr::from(b).to_string()),
        _ => None,
    }
}

/// Whether `cert`'s signature verifies with `ca`'s key.
fn signed_by(cert: &[u8], ca: &[u8]) -> bool {
    let (Ok((_, cert)), Ok((_, ca))) = (
        x509_parser::parse_x509_certificate(cert),
        x509_parser::parse_x509_certificate(ca),
    ) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

/// The names a serving certificate covers: the Service's DNS names, and loopback for an
/// operator run outside the cluster (tests, `make run`).
pub fn serving_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        "localhost".into(),
        "127.0.0.1".into(),
    ]
}

/// Validity from a little before `now` (clocks differ; a tenth of the life, at most an hour)
/// to `lifetime` after it.
fn validity(lifetime: Duration, now: OffsetDateTime) -> (OffsetDateTime, OffsetDateTime) {
    let skew = (lifetime / 10).min(Duration::from_secs(3600));
    (now - skew, now + lifetime)
}

/// A random-enough positive serial: the key and the time, hashed.
fn serial(key: &KeyPair, now: OffsetDateTime) -> SerialNumber {
    let mut hasher = Sha256::new();
    hasher.update(key.public_key_raw());
    hasher.update(now.unix_timestamp_nanos().to_be_bytes());
    let mut bytes = hasher.finalize()[..16].to_vec();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

fn ca_params(
    lifetime: Duration,
    now: OffsetDateTime,
    key: &KeyPair,
) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, CA_NAME);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    (params.not_before, params.not_after) = validity(lifetime, now);
    params.serial_number = Some(serial(key, now));
    Ok(params)
}

fn serving_params(
    names: &[String],
    lifetime: Duration,
    now: OffsetDateTime,
    ca_not_after: i64,
    key: &KeyPair,
) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.subject_alt_names = names
        .iter()
        .map(|n| match n.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => n.clone().try_into().map(SanType::DnsName),
        })
        .collect::<Result<_, _>>()?;
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    params.distinguished_name = name;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let (not_before, not_after) = validity(lifetime, now);
    params.not_before = not_before;
    // Never beyond its CA: a certificate outliving its issuer is not trusted.
    params.not_after = OffsetDateTime::from_unix_timestamp(ca_not_after)
        .map_or(not_after, |ca_end| not_after.min(ca_end));
    params.serial_number = Some(serial(key, now));
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;
    const DAY: i64 = 86_400;

    fn names() -> Vec<String> {
        serving_names("workflow-operator-webhook", "workflow-system")
    }

    fn cert(serial: &str, not_before: i64, not_after: i64) -> CertInfo {
        CertInfo {
            not_before,
            not_after,
            serial: serial.into(),
            names: names(),
        }
    }

    fn healthy() -> Stored {
        let ca = cert("ca1", NOW - DAY, NOW + 364 * DAY);
        Stored {
            ca: Some(ca.clone()),
            serving: Some(cert("s1", NOW - DAY, NOW + 29 * DAY)),
            serving_signed_by_ca: true,
            bundle: vec![ca],
        }
    }

    fn at(now: OffsetDateTime, secs: i64) -> OffsetDateTime {
        now + time::Duration::seconds(secs)
    }

    #[test]
    fn an_empty_secret_gets_a_ca_and_a_serving_certificate() {
        let plan = plan_renewal(&Stored::default(), &names(), false, NOW);
        assert!(plan.new_ca && plan.new_serving, "{plan:?}");
    }

    #[test]
    fn young_certificates_are_left_alone() {
        assert!(plan_renewal(&healthy(), &names(), true, NOW).is_empty());
    }

    #[test]
    fn a_serving_certificate_past_two_thirds_of_its_life_is_renewed_under_the_same_ca() {
        let mut stored = healthy();
        stored.serving = Some(cert("s1", NOW - 21 * DAY, NOW + 9 * DAY));
        let plan = plan_renewal(&stored, &names(), true, NOW);
        assert_eq!(
            plan,
            Renewal {
                new_serving: true,
                ..Renewal::default()
            }
        );
    }

    #[test]
    fn a_due_ca_is_renewed_first_and_the_serving_certificate_waits_until_the_new_ca_is_published() {
        let mut stored = healthy();
        let old = cert("ca1", NOW - 250 * DAY, NOW + 115 * DAY);
        stored.ca = Some(old.clone());
        stored.bundle = vec![old.clone()];
        let plan = plan_renewal(&stored, &names(), true, NOW);
        assert_eq!(
            plan,
            Renewal {
                new_ca: true,
                ..Renewal::default()
            }
        );
        // Renewed: the serving certificate is now signed by a CA that is not current.
        let new = cert("ca2", NOW, NOW + 365 * DAY);
        stored.ca = Some(new.clone());
        stored.bundle = vec![new, old];
        stored.serving_signed_by_ca = false;
        assert!(plan_renewal(&stored, &names(), false, NOW).is_empty());
        let published = plan_renewal(&stored, &names(), true, NOW + 60);
        assert_eq!(
            published,
            Renewal {
                new_serving: true,
                ..Renewal::default()
            }
        );
    }

    #[test]
    fn an_old_ca_stays_in_the_bundle_until_it_expires() {
        let mut stored = healthy();
        let new = cert("ca2", NOW - DAY, NOW + 364 * DAY);
        stored.ca = Some(new.clone());
        stored.bundle = vec![new, cert("ca1", NOW - 300 * DAY, NOW + 65 * DAY)];
        assert!(plan_renewal(&stored, &names(), true, NOW).is_empty());
        let later = plan_renewal(&stored, &names(), true, NOW + 66 * DAY);
        assert_eq!(later.drop_from_bundle, vec!["ca1".to_string()]);
    }

    #[test]
    fn an_expired_serving_certificate_is_renewed_even_before_a_new_ca_is_published() {
        let mut stored = healthy();
        stored.serving = Some(cert("s1", NOW - 31 * DAY, NOW - DAY));
        stored.serving_signed_by_ca = false;
        assert!(plan_renewal(&stored, &names(), false, NOW).new_serving);
    }

    #[test]
    fn a_serving_certificate_for_other_names_is_renewed() {
        let other = serving_names("renamed", "workflow-system");
        assert!(plan_renewal(&healthy(), &other, true, NOW).new_serving);
    }

    #[test]
    fn made_certificates_read_back_as_planned_and_rotate_with_overlap() {
        let now = OffsetDateTime::from_unix_timestamp(NOW).expect("a time");
        let lifetimes = Lifetimes {
            ca: Duration::from_secs(300),
            serving: Duration::from_secs(200),
        };
        let first = renew(
            &BTreeMap::new(),
            &plan_renewal(&Stored::default(), &names(), false, NOW),
            &names(),
            lifetimes,
            now,
        )
        .expect("first certificates");
        let stored = read(&first);
        let ca = stored.ca.clone().expect("a CA");
        let serving = stored.serving.clone().expect("a serving certificate");
        assert!(stored.serving_signed_by_ca);
        assert_eq!(serving.names, names());
        assert_eq!(serving.not_after, NOW + 200);
        assert_eq!(stored.bundle, vec![ca.clone()]);
        assert!(plan_renewal(&stored, &names(), true, NOW + 30).is_empty());

        // At two thirds of the serving life: a new serving certificate, the same CA.
        let plan = plan_renewal(&stored, &names(), true, NOW + 130);
        assert!(plan.new_serving && !plan.new_ca, "{plan:?}");
        let second = renew(&first, &plan, &names(), lifetimes, at(now, 130)).expect("renewed");
        let stored = read(&second);
        assert_ne!(
            stored.serving.as_ref().map(|s| &s.serial),
            Some(&serving.serial)
        );
        assert_eq!(stored.ca.as_ref(), Some(&ca));
        assert!(stored.serving_signed_by_ca);

        // At two thirds of the CA's: a new CA beside the old; serving switches once published.
        let plan = plan_renewal(&stored, &names(), true, NOW + 210);
        assert!(plan.new_ca, "{plan:?}");
        let third = renew(&second, &plan, &names(), lifetimes, at(now, 210)).expect("new CA");
        let stored = read(&third);
        let new_ca = stored.ca.clone().expect("the new CA");
        assert_ne!(new_ca.serial, ca.serial);
        assert_eq!(stored.bundle, vec![new_ca.clone(), ca.clone()]);
        assert!(!stored.serving_signed_by_ca);
        let plan = plan_renewal(&stored, &names(), true, NOW + 211);
        assert!(plan.new_serving && !plan.new_ca, "{plan:?}");
        let fourth = renew(&third, &plan, &names(), lifetimes, at(now, 211)).expect("switched");
        assert!(read(&fourth).serving_signed_by_ca);
        // The serving certificate never outlives its CA.
        let serving = read(&fourth).serving.expect("serving");
        assert!(serving.not_after <= new_ca.not_after);

        // The old CA leaves the bundle once expired.
        let stored = read(&fourth);
        let plan = plan_renewal(&stored, &names(), true, ca.not_after);
        assert_eq!(plan.drop_from_bundle, vec![ca.serial.clone()]);
        let fifth = renew(&fourth, &plan, &names(), lifetimes, at(now, 300)).expect("pruned");
        assert_eq!(read(&fifth).bundle, vec![new_ca]);
    }

    #[test]
    fn unreadable_entries_count_as_missing() {
        let data = BTreeMap::from([
            (TLS_CRT.to_string(), b"garbage".to_vec()),
            (
                CA_CRT.to_string(),
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(),
            ),
        ]);
        assert_eq!(read(&data), Stored::default());
    }
}
