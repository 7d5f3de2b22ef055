//! The `known_hosts` file, read as OpenSSH reads it: which host keys the runner trusts for
//! which hosts, which certificate authorities may vouch for a host (`@cert-authority`), and
//! which keys are never trusted whatever else the file says (`@revoked`).
//!
//! Host patterns are matched as `ssh` matches them: `*` and `?` wildcards, `!` to exclude,
//! `[host]:port` for a port other than 22, and hashed names (`|1|salt|hash`, HMAC-SHA1).

use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit as _, Mac as _};
use russh::keys::ssh_key::certificate::CertType;
use russh::keys::ssh_key::known_hosts::{Entry, HostPatterns, Marker};
use russh::keys::ssh_key::public::KeyData;
use russh::keys::{Certificate, HashAlg, PublicKey};
use sha1::Sha1;

/// The parsed `known_hosts` of a run, read once before any target is reached.
#[derive(Debug)]
pub struct KnownHosts {
    path: PathBuf,
    lines: Vec<Line>,
}

/// One usable line, with its number for messages.
#[derive(Debug)]
struct Line {
    number: usize,
    entry: Entry,
}

/// Why a host key (or host certificate) is refused.
#[derive(Debug, thiserror::Error)]
pub enum HostKeyError {
    /// `known_hosts` lists another key of the same kind for the host.
    #[error(
        "host key mismatch: {name} offered {algorithm} {fingerprint}, but line {line} of {} \
         lists another key for it",
        path.display()
    )]
    Mismatch {
        name: String,
        algorithm: String,
        fingerprint: String,
        line: usize,
        path: PathBuf,
    },
    /// `known_hosts` lists no key for the host.
    #[error(
        "host key not trusted: {algorithm} {fingerprint} of {} is not in {}",
        names.join(" / "),
        path.display()
    )]
    NotTrusted {
        algorithm: String,
        fingerprint: String,
        names: Vec<String>,
        path: PathBuf,
    },
    /// The key (or the authority that signed the host's certificate) is on a `@revoked` line.
    #[error(
        "host key revoked: {name} offered {what} {fingerprint}, which line {line} of {} revokes",
        path.display()
    )]
    Revoked {
        name: String,
        what: &'static str,
        fingerprint: String,
        line: usize,
        path: PathBuf,
    },
    /// The host offered a certificate signed by an authority no `@cert-authority` line trusts
    /// for it, and its key is not listed either.
    #[error(
        "host certificate not trusted: {} offered a certificate signed by {authority}, which no \
         @cert-authority line of {} trusts for it (and its key {fingerprint} is not listed)",
        names.join(" / "),
        path.display()
    )]
    UntrustedAuthority {
        names: Vec<String>,
        authority: String,
        fingerprint: String,
        path: PathBuf,
    },
    /// A trusted authority signed the host's certificate, but the certificate does not hold.
    #[error("host certificate refused: {name}'s certificate (id {id:?}) {problem}")]
    BadCertificate {
        name: String,
        id: String,
        problem: CertificateProblem,
    },
}

/// What is wrong with a certificate (a host's, or the runner's own user certificate).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateProblem {
    /// Its validity ended.
    #[error("expired at {0} (Unix time)")]
    Expired(u64),
    /// Its validity has not begun.
    #[error("is not valid before {0} (Unix time)")]
    NotYetValid(u64),
    /// Its signature is not its authority's.
    #[error("has a signature that does not verify against its authority")]
    Signature,
    /// A user certificate where a host certificate belongs, or the other way round.
    #[error("is a {found} certificate, not a {wanted} certificate")]
    Kind {
        found: &'static str,
        wanted: &'static str,
    },
    /// None of its principals is the host's address or name.
    #[error("is for {listed:?}, none of which is {names:?}")]
    Principals {
        listed: Vec<String>,
        names: Vec<String>,
    },
    /// It has critical options, which a host certificate must not have.
    #[error("has critical options {0:?}, which the runner does not honour")]
    CriticalOptions(Vec<String>),
}

impl KnownHosts {
    /// Reads `path`. Lines that are not `[marker] patterns key` (or hold a key of a kind the
    /// runner does not know) are skipped, as `ssh` skips them.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn read(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        Ok(Self::parse(path, &text))
    }

    fn parse(path: &Path, text: &str) -> Self {
        let lines = text
            .lines()
            .enumerate()
            .filter_map(|(i, line)| {
                let line = line.split_once('#').map_or(line, |(l, _)| l).trim();
                let entry = (!line.is_empty()).then(|| line.parse::<Entry>().ok())??;
                Some(Line {
                    number: i + 1,
                    entry,
                })
            })
            .collect();
        Self {
            path: path.to_path_buf(),
            lines,
        }
    }

    /// Whether an `@cert-authority` line applies to the host (any of `names` on `port`): only
    /// then is it asked for a certificate.
    pub fn has_authority_for(&self, names: &[String], port: u16) -> bool {
        self.lines_for(names, port, Some(Marker::CertAuthority))
            .next()
            .is_some()
    }

    /// Judges a host's plain key: revoked, listed, listed with another key, or unknown.
    ///
    /// # Errors
    /// Why the key is refused.
    pub fn judge_key(
        &self,
        names: &[String],
        port: u16,
        key: &PublicKey,
    ) -> Result<(), HostKeyError> {
        self.not_revoked(names, port, key.key_data(), "key")?;
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        for name in names {
            let one = std::slice::from_ref(name);
            let mut other = None;
            for line in self.lines_for(one, port, None) {
                let listed = line.entry.public_key();
                if listed.key_data() == key.key_data() {
                    return Ok(());
                }
                if listed.algorithm() == key.algorithm() {
                    other.get_or_insert(line.number);
                }
            }
            if let Some(line) = other {
                return Err(HostKeyError::Mismatch {
                    name: name.clone(),
                    algorithm: key.algorithm().to_string(),
                    fingerprint,
                    line,
                    path: self.path.clone(),
                });
            }
        }
        Err(HostKeyError::NotTrusted {
            algorithm: key.algorithm().to_string(),
            fingerprint,
            names: names.to_vec(),
            path: self.path.clone(),
        })
    }

    /// Judges a host's certificate: neither it nor its authority revoked, signed by an
    /// authority an `@cert-authority` line trusts for the host, valid now, a host certificate
    /// for one of `names`. A certificate no listed authority signed falls back to its key, as
    /// `ssh` does: trusted when that key is listed for the host.
    ///
    /// # Errors
    /// Why the certificate is refused.
    pub fn judge_certificate(
        &self,
        names: &[String],
        port: u16,
        certificate: &Certificate,
        now: u64,
    ) -> Result<(), HostKeyError> {
        let authority = certificate.signature_key();
        self.not_revoked(names, port, certificate.public_key(), "certificate for key")?;
        self.not_revoked(names, port, authority, "certificate signed by")?;
        let trusted = self
            .lines_for(names, port, Some(Marker::CertAuthority))
            .any(|line| line.entry.public_key().key_data() == authority);
        if !trusted {
            let key = PublicKey::from(certificate.public_key().clone());
            return self.judge_key(names, port, &key).map_err(|why| match why {
                HostKeyError::NotTrusted { fingerprint, .. } => HostKeyError::UntrustedAuthority {
                    names: names.to_vec(),
                    authority: authority.fingerprint(HashAlg::Sha256).to_string(),
                    fingerprint,
                    path: self.path.clone(),
                },
                other => other,
            });
        }
        check_certificate(certificate, CertType::Host, now)
            .and_then(|()| host_principal(certificate, names))
            .map_err(|problem| HostKeyError::BadCertificate {
                name: names.first().cloned().unwrap_or_default(),
                id: certificate.key_id().to_owned(),
                problem,
            })
    }

    /// Refuses `key` (`what` the host offered: its key, its certificate's key or authority)
    /// when a `@revoked` line for the host lists it.
    fn not_revoked(
        &self,
        names: &[String],
        port: u16,
        key: &KeyData,
        what: &'static str,
    ) -> Result<(), HostKeyError> {
        for name in names {
            let one = std::slice::from_ref(name);
            if let Some(line) = self
                .lines_for(one, port, Some(Marker::Revoked))
                .find(|line| line.entry.public_key().key_data() == key)
            {
                return Err(HostKeyError::Revoked {
                    name: name.clone(),
                    what,
                    fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
                    line: line.number,
                    path: self.path.clone(),
                });
            }
        }
        Ok(())
    }

    /// The lines with `marker` (none: plain keys) whose patterns match one of `names`.
    fn lines_for<'a>(
        &'a self,
        names: &'a [String],
        port: u16,
        marker: Option<Marker>,
    ) -> impl Iterator<Item = &'a Line> + 'a {
        self.lines.iter().filter(move |line| {
            line.entry.marker().copied() == marker
                && names
                    .iter()
                    .any(|name| matches(line.entry.host_patterns(), &host_port(name, port)))
        })
    }
}

/// The certificate's checks that do not depend on who it is for: its signature (by the
/// authority it names: whether that authority is trusted is the caller's question), its
/// validity at `now` and its kind.
///
/// # Errors
/// The first check it fails.
pub fn check_certificate(
    certificate: &Certificate,
    wanted: CertType,
    now: u64,
) -> Result<(), CertificateProblem> {
    if certificate.verify_signature().is_err() {
        return Err(CertificateProblem::Signature);
    }
    if now >= certificate.valid_before() {
        return Err(CertificateProblem::Expired(certificate.valid_before()));
    }
    if now < certificate.valid_after() {
        return Err(CertificateProblem::NotYetValid(certificate.valid_after()));
    }
    let kind = |t: CertType| if t.is_host() { "host" } else { "user" };
    if certificate.cert_type() != wanted {
        return Err(CertificateProblem::Kind {
            found: kind(certificate.cert_type()),
            wanted: kind(wanted),
        });
    }
    Ok(())
}

/// A host certificate must name the host (a principal matching its address or name) and
/// have no critical options (none is defined for hosts).
fn host_principal(certificate: &Certificate, names: &[String]) -> Result<(), CertificateProblem> {
    let options: Vec<String> = certificate.critical_options().keys().cloned().collect();
    if !options.is_empty() {
        return Err(CertificateProblem::CriticalOptions(options));
    }
    let listed = certificate.valid_principals();
    if names.iter().any(|name| {
        listed
            .iter()
            .any(|p| glob(&p.to_ascii_lowercase(), &name.to_ascii_lowercase()))
    }) {
        return Ok(());
    }
    Err(CertificateProblem::Principals {
        listed: listed.to_vec(),
        names: names.to_vec(),
    })
}

/// How `known_hosts` names a host on `port`: the name itself on 22, `[name]:port` otherwise.
fn host_port(name: &str, port: u16) -> String {
    let name = name.to_ascii_lowercase();
    if port == 22 {
        name
    } else {
        format!("[{name}]:{port}")
    }
}

/// Whether `patterns` match `host` (as [`host_port`] gives it): a hashed name by its HMAC,
/// a list when one pattern matches and no `!pattern` does.
fn matches(patterns: &HostPatterns, host: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => Hmac::<Sha1>::new_from_slice(salt)
            .map(|mac| mac.chain_update(host.as_bytes()).verify_slice(hash).is_ok())
            .unwrap_or(false),
        HostPatterns::Patterns(list) => {
            let mut hit = false;
            for pattern in list {
                let pattern = pattern.to_ascii_lowercase();
                match pattern.strip_prefix('!') {
                    Some(negated) if glob(negated, host) => return false,
                    Some(_) => {}
                    None => hit |= glob(&pattern, host),
                }
            }
            hit
        }
    }
}

/// `ssh`'s pattern match: `*` any run of characters, `?` any one, the rest literal.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // The classic two-pointer match, going back to the last `*` on a miss.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        match p.get(i) {
            Some('*') => {
                star = Some(i);
                mark = j;
                i += 1;
            }
            Some(&c) if c == '?' || c == t[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some(s) => {
                    i = s + 1;
                    mark += 1;
                    j = mark;
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFdRYsVYUAD9CnSRl/bFITqC62UwcnJY7j6KIBuFpR+Q";
    const KEY_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC/yXRtndEoRKjnCouDpS0bmMBBZ/PMDhHzlFQMYeMK3";

    fn key(text: &str) -> PublicKey {
        text.parse().expect("a key")
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn patterns_match_as_ssh_matches_them() {
        assert!(glob("10.0.0.*", "10.0.0.7"));
        assert!(glob("node-?", "node-1"));
        assert!(!glob("node-?", "node-12"));
        assert!(glob("[10.0.0.1]:2222", "[10.0.0.1]:2222"));
        let list = |s: &str| s.parse::<HostPatterns>().expect("patterns");
        assert!(matches(
            &list("*.example.org,!bad.example.org"),
            "ok.example.org"
        ));
        assert!(!matches(
            &list("*.example.org,!bad.example.org"),
            "bad.example.org"
        ));
        // What `ssh-keygen -H` made of "192.168.1.61".
        let hashed = list("|1|TYE/O+axPdUNXeXfV1U8pkci/8Q=|COQO/dg0FCBzxsu0vcvHHWLBmS4=");
        assert!(matches(&hashed, "192.168.1.61"));
        assert!(!matches(&hashed, "192.168.1.62"));
    }

    #[test]
    fn a_revoked_key_is_refused_even_when_it_is_also_listed() {
        let text = format!("10.0.0.1 {KEY_A}\n@revoked * {KEY_A}\n");
        let known = KnownHosts::parse(Path::new("kh"), &text);
        let why = known
            .judge_key(&names(&["10.0.0.1"]), 22, &key(KEY_A))
            .unwrap_err();
        assert!(
            matches!(why, HostKeyError::Revoked { line: 2, .. }),
            "{why}"
        );
    }

    #[test]
    fn a_listed_key_is_trusted_and_another_of_its_kind_is_a_mismatch_naming_the_line() {
        let text = format!("# comment\n[10.0.0.1]:2222 {KEY_A}\nnot a line\n");
        let known = KnownHosts::parse(Path::new("kh"), &text);
        assert!(
            known
                .judge_key(&names(&["10.0.0.1"]), 2222, &key(KEY_A))
                .is_ok()
        );
        let why = known
            .judge_key(&names(&["10.0.0.1"]), 2222, &key(KEY_B))
            .unwrap_err();
        assert!(
            matches!(why, HostKeyError::Mismatch { line: 2, .. }),
            "{why}"
        );
        let why = known
            .judge_key(&names(&["10.0.0.1"]), 22, &key(KEY_A))
            .unwrap_err();
        assert!(matches!(why, HostKeyError::NotTrusted { .. }), "{why}");
    }

    #[test]
    fn an_authority_applies_only_to_the_hosts_its_patterns_match() {
        let text = format!("@cert-authority 10.0.0.* {KEY_A}\n");
        let known = KnownHosts::parse(Path::new("kh"), &text);
        assert!(known.has_authority_for(&names(&["10.0.0.9", "node-9"]), 22));
        assert!(!known.has_authority_for(&names(&["10.0.1.9"]), 22));
        assert!(!known.has_authority_for(&names(&["10.0.0.9"]), 2222));
    }
}
