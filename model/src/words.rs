//! Words mean words: one validator per kind of word that reaches a command line, a script, a
//! Node or a lock (a package name, a command name, a path, an endpoint, a target's name or
//! role), so that no word is read as an option, a pattern, a removal or shell syntax.
//!
//! Each validator takes the field the word came from (for the message) and the word, and
//! refuses it with a [`WordError`] that names the word, the field and the one [`Rule`] it
//! breaks, e.g.
//! ``packages[0]: "-curl" is not a valid package name: it starts with '-' ...``.
//! The operator checks the group's own words with them (targets, roles, `clusterName`,
//! `workflowSteps`), and the built-in workflow types their params (through the plugin SDK,
//! which re-exports this module).
//!
//! ```
//! use workflow_model::words::{self, Rule};
//!
//! assert!(words::package_name("packages[0]", "chrony").is_ok());
//! let refused = words::package_name("packages[1]", "chrony-").unwrap_err();
//! assert_eq!(refused.rule, Rule::AptSuffix);
//! assert!(refused.to_string().starts_with(r#"packages[1]: "chrony-" is not a valid package name"#));
//! ```

use std::fmt;

use crate::text::{self, Marker};

/// Longest start of a refused word that its error quotes.
const QUOTED_BYTES: usize = 64;

/// A word that breaks a rule of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {word:?} is not a valid {kind}: {rule}")]
pub struct WordError {
    /// Where the word came from, e.g. `spec.targets[2].name` or `packages[0]`.
    pub field: String,
    /// The word, cut to 64 bytes (its control characters are escaped when shown).
    pub word: String,
    /// What it should have been.
    pub kind: Kind,
    /// The rule it breaks.
    pub rule: Rule,
}

impl WordError {
    /// The error for `word` of `field`, which breaks `rule` of `kind`.
    pub fn new(field: &str, word: &str, kind: Kind, rule: Rule) -> Self {
        Self {
            field: field.to_owned(),
            word: text::truncate(word, QUOTED_BYTES, Marker::Length).into_owned(),
            kind,
            rule,
        }
    }

    /// The message without the field: what it is and why it is refused.
    ///
    /// ```
    /// let e = workflow_model::words::command_name("commands[0]", "-rf").unwrap_err();
    /// assert_eq!(e.reason(), r#""-rf" is not a valid command name: it starts with '-', which a program reads as an option"#);
    /// ```
    pub fn reason(&self) -> String {
        format!(
            "{:?} is not a valid {}: {}",
            self.word, self.kind, self.rule
        )
    }
}

/// The kinds of words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A DNS-1123 label: workflow types, step names.
    DnsLabel,
    /// A DNS-1123 subdomain: target names (they become Node names), DNS domains.
    DnsSubdomain,
    /// A target's role, as a Kubernetes label value.
    Role,
    /// A group's `clusterName`.
    ClusterName,
    /// A package name for the targets' package manager.
    PackageName,
    /// A command looked up on the PATH.
    CommandName,
    /// An absolute path.
    Path,
    /// `host:port` or `[IPv6]:port`.
    Endpoint,
    /// An IP address or a host name to connect to.
    Host,
    /// A service (systemd unit, OpenRC service).
    ServiceName,
    /// An operating system ID of `/etc/os-release`.
    OsId,
    /// A user to log in as.
    UserName,
    /// A container image reference.
    Image,
    /// An environment variable's name.
    EnvName,
}

impl Kind {
    /// How messages name the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::DnsLabel => "DNS-1123 label",
            Kind::DnsSubdomain => "DNS-1123 subdomain",
            Kind::Role => "role",
            Kind::ClusterName => "cluster name",
            Kind::PackageName => "package name",
            Kind::CommandName => "command name",
            Kind::Path => "path",
            Kind::Endpoint => "endpoint",
            Kind::Host => "host",
            Kind::ServiceName => "service name",
            Kind::OsId => "OS ID",
            Kind::UserName => "user name",
            Kind::Image => "image reference",
            Kind::EnvName => "environment variable name",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rules a word can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// It has no characters.
    Empty,
    /// It has more bytes than its kind allows.
    TooLong(usize),
    /// A dot-separated part of a DNS subdomain is longer than 63 characters.
    PartTooLong,
    /// It holds a control character (ESC, NUL, a newline, DEL, C1 controls).
    Control,
    /// It holds a blank, which would split it into two words.
    Whitespace,
    /// It starts with `-`: a program reads it as an option.
    LeadingDash,
    /// It holds `*`, `?`, `[` or `]`: a shell or a package manager reads it as a pattern.
    Glob,
    /// It holds shell syntax: quotes, `$`, a backquote, `;`, `&`, `|`, `<`, `>`, parentheses
    /// or a backslash.
    ShellSyntax,
    /// It holds `/`: a name on the PATH, not a path.
    Slash,
    /// It is not an absolute path.
    Relative,
    /// It holds `=`: a version pin, which this field does not take.
    VersionPin,
    /// It ends in `-` or in a single `+`: apt reads those as "remove" and "install".
    AptSuffix,
    /// The version after `=` does not start with a digit or holds other characters than a
    /// version's.
    Version,
    /// It holds a character outside of these.
    Characters(&'static str),
    /// It does not start (and end) as its kind must.
    Edges(&'static str),
    /// It is not `host:port` or `[IPv6]:port`.
    NotHostPort,
    /// Its port is not a number from 1 to 65535.
    Port,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Empty => f.write_str("it is empty"),
            Rule::TooLong(max) => write!(f, "it is longer than {max} bytes"),
            Rule::PartTooLong => f.write_str("a part between dots is longer than 63 characters"),
            Rule::Control => f.write_str("it holds a control character"),
            Rule::Whitespace => f.write_str("it holds a blank, which would make it two words"),
            Rule::LeadingDash => {
                f.write_str("it starts with '-', which a program reads as an option")
            }
            Rule::Glob => f.write_str(
                "it holds '*', '?', '[' or ']', which a shell or a package manager reads as a pattern",
            ),
            Rule::ShellSyntax => f.write_str(
                "it holds shell syntax (a quote, '$', '`', ';', '&', '|', '<', '>', a parenthesis or a backslash)",
            ),
            Rule::Slash => f.write_str("it holds '/': give a command's name, not its path"),
            Rule::Relative => f.write_str("it must be an absolute path (start with '/')"),
            Rule::VersionPin => f.write_str("it pins a version with '=', which this field does not take"),
            Rule::AptSuffix => f.write_str(
                "it ends in '-' or in a single '+', which apt reads as \"remove\" or \"install\"",
            ),
            Rule::Version => f.write_str(
                "the version after '=' must start with a digit and hold only letters, digits, '.', '+', '~', ':' and '-'",
            ),
            Rule::Characters(allowed) => write!(f, "only {allowed} are allowed"),
            Rule::Edges(what) => write!(f, "it must {what}"),
            Rule::NotHostPort => f.write_str("it must be host:port or [IPv6]:port"),
            Rule::Port => f.write_str("its port must be a number from 1 to 65535"),
        }
    }
}

/// The regular expression of [`dns_label`] (without its length bound of 63), for schemas.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The regular expression of [`dns_subdomain`] (without its length bounds), for schemas.
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Longest DNS-1123 subdomain.
pub const DNS_SUBDOMAIN_MAX: usize = 253;
/// The regular expression of [`role`], which also takes the empty role (a target without
/// one), for schemas.
pub const ROLE_PATTERN: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$";
/// Longest role (a Kubernetes label value).
pub const ROLE_MAX: usize = 63;
/// The regular expression of [`cluster_name`] (without its length bound), for schemas.
pub const CLUSTER_NAME_PATTERN: &str = r"^[^\x00-\x1F\x7F-\x9F]*$";
/// Longest `clusterName`: the longest a managed service allows (EKS, 100 characters).
pub const CLUSTER_NAME_MAX: usize = 100;

/// The word being checked: what it is and where it came from.
struct Word<'a> {
    field: &'a str,
    word: &'a str,
    kind: Kind,
}

impl Word<'_> {
    fn refuse(&self, rule: Rule) -> WordError {
        WordError::new(self.field, self.word, self.kind, rule)
    }

    /// Refused by `rule` when `bad` holds.
    fn unless(&self, bad: bool, rule: Rule) -> Result<(), WordError> {
        if bad { Err(self.refuse(rule)) } else { Ok(()) }
    }

    /// What no word may be: empty, longer than `max` bytes, holding a control character or a
    /// blank.
    fn plain(&self, max: usize) -> Result<(), WordError> {
        let w = self.word;
        self.unless(w.is_empty(), Rule::Empty)?;
        self.unless(w.len() > max, Rule::TooLong(max))?;
        self.unless(w.chars().any(char::is_control), Rule::Control)?;
        self.unless(w.chars().any(char::is_whitespace), Rule::Whitespace)
    }

    fn no_leading_dash(&self) -> Result<(), WordError> {
        self.unless(self.word.starts_with('-'), Rule::LeadingDash)
    }

    fn no_glob(&self) -> Result<(), WordError> {
        self.unless(self.word.contains(['*', '?', '[', ']']), Rule::Glob)
    }

    /// Refused by [`Rule::Characters`] when a character is not `fine`.
    fn only(&self, fine: impl Fn(char) -> bool, allowed: &'static str) -> Result<(), WordError> {
        self.unless(!self.word.chars().all(fine), Rule::Characters(allowed))
    }

    /// Refused by [`Rule::Edges`] unless the first character is `fine` (a letter or digit of
    /// the word's kind).
    fn starts_alphanumeric(&self, fine: impl Fn(char) -> bool) -> Result<(), WordError> {
        self.unless(
            !self.word.starts_with(fine),
            Rule::Edges("start with a letter or digit"),
        )
    }

    /// Refused by [`Rule::Edges`] unless the first and last characters are `fine`.
    fn edges(&self, fine: impl Fn(char) -> bool, what: &'static str) -> Result<(), WordError> {
        let first = self.word.chars().next().is_some_and(&fine);
        let last = self.word.chars().next_back().is_some_and(&fine);
        self.unless(!(first && last), Rule::Edges(what))
    }
}

fn lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A DNS-1123 label (RFC 1123): lowercase letters, digits and `-`, starting and ending with a
/// letter or digit, at most 63 characters. What Kubernetes takes as a label value and as part
/// of an object name: workflow types and step names.
///
/// ```
/// use workflow_model::words::dns_label;
///
/// assert!(dns_label("spec.workflowSteps[0]", "pre-check").is_ok());
/// assert!(dns_label("spec.workflowSteps[0]", "Pre_Check").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn dns_label(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::DnsLabel,
    };
    w.plain(63)?;
    w.only(
        |c| lower_alnum(c) || c == '-',
        "lowercase letters, digits and '-'",
    )?;
    w.edges(
        lower_alnum,
        "start and end with a lowercase letter or digit",
    )
}

/// A DNS-1123 subdomain: DNS-1123 labels joined by `.`, at most 253 characters. What
/// Kubernetes takes as a Node's name: a target's name (a target that joins becomes the Node of
/// its name), a DNS domain.
///
/// ```
/// use workflow_model::words::dns_subdomain;
///
/// assert!(dns_subdomain("spec.targets[0].name", "node-1").is_ok());
/// assert!(dns_subdomain("spec.targets[0].name", "ip-10-0-0-1.ec2.internal").is_ok());
/// assert!(dns_subdomain("spec.targets[0].name", "node 1").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn dns_subdomain(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::DnsSubdomain,
    };
    w.plain(DNS_SUBDOMAIN_MAX)?;
    w.only(
        |c| lower_alnum(c) || c == '-' || c == '.',
        "lowercase letters, digits, '-' and '.'",
    )?;
    for part in word.split('.') {
        w.unless(part.len() > 63, Rule::PartTooLong)?;
        let fine = part.starts_with(lower_alnum) && part.ends_with(lower_alnum);
        w.unless(
            !fine,
            Rule::Edges("start and end with a lowercase letter or digit, and so must each part between dots"),
        )?;
    }
    Ok(())
}

/// A target's role (`Master`, `Worker`, `etcd`): a Kubernetes label value of letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit, at most 63 characters. An
/// empty role (a target without one) is no word and is not checked here.
///
/// ```
/// use workflow_model::words::role;
///
/// assert!(role("spec.targets[0].role", "Master").is_ok());
/// assert!(role("ssh.roles[0]", "worker,master").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn role(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::Role,
    };
    w.plain(ROLE_MAX)?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'),
        "letters, digits, '-', '_' and '.'",
    )?;
    w.edges(
        |c| c.is_ascii_alphanumeric(),
        "start and end with a letter or digit",
    )
}

/// A group's `clusterName`: at most 100 bytes, no control characters. It may be empty (the
/// seed's groups may leave it so).
///
/// ```
/// use workflow_model::words::cluster_name;
///
/// assert!(cluster_name("spec.clusterName", "prod-eu-1").is_ok());
/// assert!(cluster_name("spec.clusterName", "prod\u{1b}[2J").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn cluster_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::ClusterName,
    };
    w.unless(
        word.len() > CLUSTER_NAME_MAX,
        Rule::TooLong(CLUSTER_NAME_MAX),
    )?;
    w.unless(word.chars().any(char::is_control), Rule::Control)
}

/// Longest package name.
const PACKAGE_MAX: usize = 128;

/// A package name, as Debian's and RPM's rules and apk's allow them, and nothing apt,
/// dnf, zypper or apk reads as anything else: letters, digits, `.`, `+`, `-` and `_`, starting
/// with a letter or digit (no option, no `~` or `?` pattern, no `@` group, no `/` release), no
/// glob, no `=` version pin ([`package_name_with_version`] takes one), not ending in `-` or a
/// single `+` (apt's "remove" and "install"; `g++` passes), at most 128 bytes. One
/// `:architecture` may follow (`libc6:i386`, apt's multi-arch).
///
/// ```
/// use workflow_model::words::package_name;
///
/// for fine in ["chrony", "g++", "gcc-c++", "python3.11", "mod_ssl", "NetworkManager", "libc6:i386"] {
///     assert!(package_name("packages", fine).is_ok(), "{fine}");
/// }
/// for refused in ["-y", "curl-", "lib*", "~nfoo", "curl=7.88", "@core", "curl;reboot"] {
///     assert!(package_name("packages", refused).is_err(), "{refused}");
/// }
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn package_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::PackageName,
    };
    w.plain(PACKAGE_MAX)?;
    w.no_leading_dash()?;
    w.no_glob()?;
    w.unless(word.contains('='), Rule::VersionPin)?;
    package_body(&w)
}

/// A package name with an optional version pin, `name=version` (`curl=7.88.1-10+deb12u5`), for
/// a type that pins versions explicitly: the name as [`package_name`] takes it, the version
/// starting with a digit and made of letters, digits, `.`, `+`, `~`, `:` and `-`.
///
/// ```
/// use workflow_model::words::package_name_with_version;
///
/// assert!(package_name_with_version("packages", "curl=7.88.1-10+deb12u5").is_ok());
/// assert!(package_name_with_version("packages", "curl").is_ok());
/// assert!(package_name_with_version("packages", "curl=*").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn package_name_with_version(field: &str, word: &str) -> Result<(), WordError> {
    let Some((name, version)) = word.split_once('=') else {
        return package_name(field, word);
    };
    let w = Word {
        field,
        word,
        kind: Kind::PackageName,
    };
    w.plain(PACKAGE_MAX)?;
    w.no_leading_dash()?;
    w.no_glob()?;
    let named = Word {
        field,
        word: name,
        kind: Kind::PackageName,
    };
    package_body(&named).map_err(|e| w.refuse(e.rule))?;
    w.unless(
        !version.starts_with(|c: char| c.is_ascii_digit())
            || !version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '~' | ':' | '-')),
        Rule::Version,
    )?;
    w.unless(apt_suffix(word), Rule::AptSuffix)
}

/// A package name's characters, start and end (the checks of [`package_name`] after the
/// common ones).
fn package_body(w: &Word<'_>) -> Result<(), WordError> {
    let (name, arch) = match w.word.split_once(':') {
        Some((name, arch)) => (name, Some(arch)),
        None => (w.word, None),
    };
    w.unless(
        !name.starts_with(|c: char| c.is_ascii_alphanumeric()),
        Rule::Edges("start with a letter or digit"),
    )?;
    w.unless(
        !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_')),
        Rule::Characters("letters, digits, '.', '+', '-' and '_' (and one ':architecture')"),
    )?;
    if let Some(arch) = arch {
        w.unless(
            arch.is_empty() || !arch.chars().all(|c| lower_alnum(c) || c == '-'),
            Rule::Characters(
                "letters, digits, '.', '+', '-' and '_', and after one ':' an architecture of lowercase letters, digits and '-'",
            ),
        )?;
    }
    w.unless(apt_suffix(w.word), Rule::AptSuffix)
}

/// Whether apt reads the end of `word` as "remove" (`-`) or "install" (a single `+`).
fn apt_suffix(word: &str) -> bool {
    word.ends_with('-') || (word.ends_with('+') && !word.ends_with("++"))
}

/// A command's name, looked up on the PATH (`systemctl`, `iptables-save`): letters, digits,
/// `.`, `_`, `+`, `-`, `@` and `:`, not starting with `-`, no glob, no `/` (a name, not a
/// path), at most 255 bytes.
///
/// ```
/// use workflow_model::words::command_name;
///
/// assert!(command_name("requiredCommands", "iptables-save").is_ok());
/// assert!(command_name("requiredCommands", "/usr/bin/ls").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn command_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::CommandName,
    };
    w.plain(255)?;
    w.no_leading_dash()?;
    w.no_glob()?;
    w.unless(word.contains('/'), Rule::Slash)?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-' | '@' | ':'),
        "letters, digits, '.', '_', '+', '-', '@' and ':'",
    )
}

/// An absolute path (`/etc/chrony/chrony.conf`): starting with `/`, no glob, no blank, no
/// control character, no shell syntax, at most 4096 bytes.
///
/// ```
/// use workflow_model::words::path;
///
/// assert!(path("files", "/etc/chrony/chrony.conf").is_ok());
/// assert!(path("files", "/etc/*.conf").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn path(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::Path,
    };
    w.plain(4096)?;
    w.no_leading_dash()?;
    w.unless(!word.starts_with('/'), Rule::Relative)?;
    w.no_glob()?;
    w.unless(
        word.contains(['\'', '"', '`', '$', ';', '&', '|', '<', '>', '(', ')', '\\']),
        Rule::ShellSyntax,
    )
}

/// An endpoint, `host:port` (`10.0.0.1:6443`, `api.example.com:443`) or `[IPv6]:port`
/// (`[fd00::1]:6443`): a host of letters, digits, `.`, `-` and `_` (the brackets of an IPv6
/// address only in that place), a port from 1 to 65535, at most 261 bytes.
///
/// ```
/// use workflow_model::words::endpoint;
///
/// assert!(endpoint("endpoints", "10.0.0.1:6443").is_ok());
/// assert!(endpoint("endpoints", "[fd00::1]:6443").is_ok());
/// assert!(endpoint("endpoints", "10.0.0.*:6443").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn endpoint(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::Endpoint,
    };
    w.plain(261)?;
    w.no_leading_dash()?;
    let (host, port) = match word.strip_prefix('[') {
        Some(rest) => {
            let (v6, port) = rest
                .split_once("]:")
                .ok_or_else(|| w.refuse(Rule::NotHostPort))?;
            w.unless(
                v6.is_empty()
                    || !v6
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.'),
                Rule::Characters("in brackets, an IPv6 address's hex digits, ':' and '.'"),
            )?;
            (None, port)
        }
        None => {
            w.no_glob()?;
            let (host, port) = word
                .rsplit_once(':')
                .ok_or_else(|| w.refuse(Rule::NotHostPort))?;
            (Some(host), port)
        }
    };
    if let Some(host) = host {
        w.unless(host.is_empty(), Rule::NotHostPort)?;
        w.unless(
            !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')),
            Rule::Characters("in the host, letters, digits, '.', '-' and '_'"),
        )?;
    }
    let port_fine = !port.is_empty()
        && port.chars().all(|c| c.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
    w.unless(!port_fine, Rule::Port)
}

/// A host to connect to (`10.0.0.1`, `fd00::1`, `bastion.example.com`): an IP address, or a
/// name of letters, digits, `.`, `-` and `_` that starts and ends with a letter or digit, at
/// most 253 bytes.
///
/// ```
/// use workflow_model::words::host;
///
/// assert!(host("ssh.jumpHost.address", "10.0.0.1").is_ok());
/// assert!(host("ssh.jumpHost.address", "bastion.example.com").is_ok());
/// assert!(host("ssh.jumpHost.address", "-oProxyCommand=x").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn host(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::Host,
    };
    w.plain(253)?;
    w.no_leading_dash()?;
    if word.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    w.no_glob()?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'),
        "letters, digits, '.', '-' and '_' (or an IP address)",
    )?;
    w.edges(
        |c| c.is_ascii_alphanumeric(),
        "start and end with a letter or digit",
    )
}

/// A service's name (`chronyd`, `getty@tty1.service`): letters, digits, `.`, `@`, `_`, `:` and
/// `-`, starting with a letter or digit, no glob (`systemctl` matches patterns), at most 255
/// bytes.
///
/// ```
/// use workflow_model::words::service_name;
///
/// assert!(service_name("services", "getty@tty1.service").is_ok());
/// assert!(service_name("services", "ssh*").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn service_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::ServiceName,
    };
    w.plain(255)?;
    w.no_leading_dash()?;
    w.no_glob()?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '@' | '_' | ':' | '-'),
        "letters, digits, '.', '@', '_', ':' and '-'",
    )?;
    w.starts_alphanumeric(|c| c.is_ascii_alphanumeric())
}

/// An operating system's ID as `/etc/os-release` writes it (`debian`, `rhel`, `opensuse-leap`):
/// lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 64
/// bytes.
///
/// ```
/// use workflow_model::words::os_id;
///
/// assert!(os_id("osFamilies", "opensuse-leap").is_ok());
/// assert!(os_id("osFamilies", "Debian").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn os_id(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::OsId,
    };
    w.plain(64)?;
    w.no_leading_dash()?;
    w.only(
        |c| lower_alnum(c) || matches!(c, '.' | '_' | '-'),
        "lowercase letters, digits, '.', '_' and '-' (as os-release writes an ID)",
    )?;
    w.starts_alphanumeric(lower_alnum)
}

/// A user to log in as (`root`, `ops`, `svc_deploy`, `alice@corp.example`): letters, digits,
/// `.`, `_`, `@` and `-`, not starting with `-`, at most 64 bytes.
///
/// ```
/// use workflow_model::words::user_name;
///
/// assert!(user_name("ssh.user", "ops").is_ok());
/// assert!(user_name("ssh.user", "-oProxyCommand=x").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn user_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::UserName,
    };
    w.plain(64)?;
    w.no_leading_dash()?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'),
        "letters, digits, '.', '_', '@' and '-'",
    )
}

/// A container image reference (`busybox:1.36`, `registry.k8s.io/pause:3.10`,
/// `repo@sha256:…`): letters, digits, `.`, `/`, `:`, `@`, `_` and `-`, starting with a letter
/// or digit, at most 512 bytes.
///
/// ```
/// use workflow_model::words::image;
///
/// assert!(image("image", "registry.k8s.io/pause:3.10").is_ok());
/// assert!(image("image", "busybox --privileged").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn image(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::Image,
    };
    w.plain(512)?;
    w.no_leading_dash()?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | ':' | '@' | '_' | '-'),
        "letters, digits, '.', '/', ':', '@', '_' and '-'",
    )?;
    w.starts_alphanumeric(|c| c.is_ascii_alphanumeric())
}

/// An environment variable's name as Kubernetes takes it: letters, digits, `_`, `-` and `.`,
/// not starting with a digit.
///
/// ```
/// use workflow_model::words::env_name;
///
/// assert!(env_name("env", "WORKFLOW_SSH_USER").is_ok());
/// assert!(env_name("env", "1X").is_err());
/// ```
///
/// # Errors
/// The first rule `word` breaks.
pub fn env_name(field: &str, word: &str) -> Result<(), WordError> {
    let w = Word {
        field,
        word,
        kind: Kind::EnvName,
    };
    w.plain(4096)?;
    w.only(
        |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'),
        "letters, digits, '_', '-' and '.'",
    )?;
    w.unless(
        word.starts_with(|c: char| c.is_ascii_digit()),
        Rule::Edges("not start with a digit"),
    )
}

/// Checks every word of `list` with `check`, naming each by its index (`packages[2]`).
///
/// ```
/// use workflow_model::words::{self, each};
///
/// let list = vec!["chrony".to_string(), "curl-".to_string()];
/// let refused = each("packages", &list, words::package_name).unwrap_err();
/// assert_eq!(refused.field, "packages[1]");
/// ```
///
/// # Errors
/// The first word refused.
pub fn each<'a, I, S>(
    field: &str,
    list: I,
    check: fn(&str, &str) -> Result<(), WordError>,
) -> Result<(), WordError>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + 'a + ?Sized,
{
    list.into_iter()
        .enumerate()
        .try_for_each(|(i, word)| check(&format!("{field}[{i}]"), word.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Check = fn(&str, &str) -> Result<(), WordError>;

    /// Every validator, by name.
    const ALL: [(&str, Check); 14] = [
        ("dns_label", dns_label),
        ("dns_subdomain", dns_subdomain),
        ("role", role),
        ("cluster_name", cluster_name),
        ("package_name", package_name),
        ("package_name_with_version", package_name_with_version),
        ("command_name", command_name),
        ("path", path),
        ("endpoint", endpoint),
        ("host", host),
        ("service_name", service_name),
        ("os_id", os_id),
        ("user_name", user_name),
        ("image", image),
    ];

    fn rule(check: Check, word: &str) -> Option<Rule> {
        check("f", word).err().map(|e| e.rule)
    }

    fn accepts(check: Check, words: &[&str]) {
        for word in words {
            assert_eq!(check("f", word), Ok(()), "{word:?} should be accepted");
        }
    }

    fn refuses(check: Check, words: &[&str], expected: Rule) {
        for word in words {
            assert_eq!(rule(check, word), Some(expected), "{word:?}");
        }
    }

    #[test]
    fn the_error_names_the_field_the_word_its_kind_and_the_rule() {
        let e = package_name("spec.params.setup.packages[3]", "curl-").unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.params.setup.packages[3]: \"curl-\" is not a valid package name: it ends in '-' \
             or in a single '+', which apt reads as \"remove\" or \"install\""
        );
        assert_eq!(
            (e.field.as_str(), e.word.as_str(), e.kind),
            ("spec.params.setup.packages[3]", "curl-", Kind::PackageName)
        );
    }

    #[test]
    fn the_error_quotes_a_control_character_escaped_and_a_long_word_cut() {
        let e = command_name("commands[0]", "ls\u{1b}[2J").unwrap_err();
        assert!(e.to_string().contains(r#""ls\u{1b}[2J""#), "{e}");
        let long = "a".repeat(1000);
        let e = path("files[0]", &long).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
        assert!(e.word.ends_with("(1000 bytes in all)"), "{}", e.word);
    }

    #[test]
    fn every_word_is_refused_empty_except_a_cluster_name() {
        for (name, check) in ALL {
            let expected = (name != "cluster_name").then_some(Rule::Empty);
            assert_eq!(rule(check, ""), expected, "{name}");
        }
    }

    #[test]
    fn every_word_is_refused_beyond_its_length() {
        let part = |c: &str, n: usize| c.repeat(n);
        let cases: [(Check, String); 14] = [
            (dns_label, part("a", 63)),
            (
                dns_subdomain,
                [part("a", 63), part("b", 63), part("c", 63), part("d", 61)].join("."),
            ),
            (role, part("a", 63)),
            (cluster_name, part("a", 100)),
            (package_name, part("a", 128)),
            (package_name_with_version, part("a", 128)),
            (command_name, part("a", 255)),
            (path, format!("/{}", part("a", 4095))),
            (endpoint, format!("{}:65535", part("a", 255))),
            (host, part("a", 253)),
            (service_name, part("a", 255)),
            (os_id, part("a", 64)),
            (user_name, part("a", 64)),
            (image, part("a", 512)),
        ];
        for (check, fits) in cases {
            let max = fits.len();
            assert_eq!(check("f", &fits), Ok(()), "{max}");
            let over = format!("a{fits}");
            assert_eq!(rule(check, &over), Some(Rule::TooLong(max)), "{max}");
        }
        assert_eq!(dns_subdomain("f", &format!("{}.b", part("a", 63))), Ok(()));
        assert_eq!(rule(dns_subdomain, &part("a", 64)), Some(Rule::PartTooLong));
    }

    #[test]
    fn control_characters_are_refused_in_every_word() {
        for (name, check) in ALL {
            for control in ["\u{1b}[2J", "\u{0}", "\u{7f}", "\u{9b}31m", "\n"] {
                let word = format!("a{control}b");
                assert_eq!(rule(check, &word), Some(Rule::Control), "{name}: {word:?}");
            }
        }
    }

    #[test]
    fn a_blank_is_refused_in_every_word_but_a_cluster_name() {
        for (name, check) in ALL.into_iter().filter(|(n, _)| *n != "cluster_name") {
            for word in ["a b", "a\u{a0}b", "a\u{2003}b"] {
                assert_eq!(
                    rule(check, word),
                    Some(Rule::Whitespace),
                    "{name}: {word:?}"
                );
            }
        }
        assert_eq!(cluster_name("f", "test cluster"), Ok(()));
    }

    #[test]
    fn a_leading_dash_is_refused_where_a_word_reaches_a_command_line() {
        let options: [Check; 9] = [
            package_name,
            package_name_with_version,
            command_name,
            path,
            endpoint,
            service_name,
            os_id,
            user_name,
            image,
        ];
        for check in options {
            assert_eq!(rule(check, "-rf"), Some(Rule::LeadingDash), "-rf");
            assert_eq!(rule(check, "--help"), Some(Rule::LeadingDash), "--help");
        }
        // Names start with a letter or digit.
        let names: [Check; 3] = [dns_label, dns_subdomain, role];
        for check in names {
            assert!(matches!(rule(check, "-a"), Some(Rule::Edges(_))));
        }
    }

    #[test]
    fn globs_are_refused_in_names_paths_and_endpoints() {
        let cases: [(Check, &str); 5] = [
            (package_name, "lib"),
            (package_name_with_version, "lib"),
            (command_name, "lib"),
            (path, "/etc/"),
            (service_name, "lib"),
        ];
        for (check, base) in cases {
            for glob in ["*", "?", "[a]", "]"] {
                let word = format!("{base}{glob}");
                assert_eq!(rule(check, &word), Some(Rule::Glob), "{word:?}");
            }
        }
        refuses(endpoint, &["10.0.0.*:6443", "host?:22", "h]:1"], Rule::Glob);
    }

    #[test]
    fn a_package_name_is_a_name_debian_rpm_or_apk_may_give() {
        accepts(
            package_name,
            &[
                "chrony",
                "conntrack",
                "g++",
                "gcc-c++",
                "libstdc++6",
                "python3.11",
                "mod_ssl",
                "NetworkManager",
                "7zip",
                "libc6:i386",
                "glibc.i686",
            ],
        );
        refuses(
            package_name,
            &["~nchrony", "@core", "/stable", ".hidden", "_x", "+x"],
            Rule::Edges("start with a letter or digit"),
        );
        for bad in [
            "curl;reboot",
            "curl$x",
            "curl/bookworm",
            "curl^",
            "task,x",
            "a:b:c",
        ] {
            assert!(
                matches!(rule(package_name, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            rule(package_name, "libc6:"),
            Some(Rule::Characters(_))
        ));
    }

    #[test]
    fn a_package_name_apt_reads_as_remove_or_install_is_refused() {
        refuses(
            package_name,
            &["curl-", "curl+", "g+++-", "libc6:i386-"],
            Rule::AptSuffix,
        );
        accepts(package_name, &["g++", "c++"]);
    }

    #[test]
    fn a_version_pin_is_refused_unless_the_field_takes_one() {
        refuses(package_name, &["curl=7.88", "curl="], Rule::VersionPin);
        accepts(
            package_name_with_version,
            &["curl=7.88.1-10+deb12u5", "curl=1:2.0~rc1", "curl"],
        );
        refuses(
            package_name_with_version,
            &["curl=", "curl=latest", "curl=1;x", "curl=1=2"],
            Rule::Version,
        );
        assert_eq!(
            rule(package_name_with_version, "curl=1 2"),
            Some(Rule::Whitespace)
        );
        assert!(matches!(
            rule(package_name_with_version, "=1.0"),
            Some(Rule::Edges(_))
        ));
        assert_eq!(
            rule(package_name_with_version, "curl-=1.0"),
            Some(Rule::AptSuffix)
        );
        assert_eq!(
            rule(package_name_with_version, "curl=1.0-"),
            Some(Rule::AptSuffix)
        );
    }

    #[test]
    fn a_command_is_a_name_not_a_path() {
        accepts(
            command_name,
            &[
                "systemctl",
                "iptables-save",
                "python3.11",
                "g++",
                "kubectl-1.34",
            ],
        );
        refuses(command_name, &["/usr/bin/ls", "bin/ls"], Rule::Slash);
        for bad in ["ls;reboot", "$(id)", "a|b", "a'b", "a\\b", "a=b"] {
            assert!(
                matches!(rule(command_name, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_path_is_absolute_and_free_of_shell_syntax() {
        accepts(
            path,
            &[
                "/",
                "/etc/chrony/chrony.conf",
                "/opt/k8s/kubelet-1.34",
                "/a,b:c@d",
            ],
        );
        refuses(path, &["etc/chrony.conf", "./x", "~/x"], Rule::Relative);
        refuses(
            path,
            &[
                "/a;b", "/$HOME", "/a`id`", "/a|b", "/a&b", "/a>b", "/a(b", "/a'b", "/a\"b",
                "/a\\b",
            ],
            Rule::ShellSyntax,
        );
    }

    #[test]
    fn a_host_is_an_ip_address_or_a_name() {
        accepts(
            host,
            &[
                "10.0.0.1",
                "fd00::1",
                "bastion",
                "jump-1.example.com",
                "a_b.lan",
            ],
        );
        refuses(host, &["-oProxyCommand=x", "-1"], Rule::LeadingDash);
        refuses(host, &["10.0.0.*", "[fd00::1]"], Rule::Glob);
        for bad in ["a;b", "a/b", "a:22", "user@h"] {
            assert!(
                matches!(rule(host, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
        refuses(
            host,
            &["bastion.", ".lan", "a-"],
            Rule::Edges("start and end with a letter or digit"),
        );
    }

    #[test]
    fn an_endpoint_is_a_host_and_a_port() {
        accepts(
            endpoint,
            &[
                "10.0.0.1:6443",
                "api.example.com:443",
                "[fd00::1]:6443",
                "[::ffff:10.0.0.1]:22",
            ],
        );
        refuses(
            endpoint,
            &["10.0.0.1", ":6443", "[fd00::1]6443", "[fd00::1"],
            Rule::NotHostPort,
        );
        refuses(
            endpoint,
            &["h:0", "h:65536", "h:", "h:+1", "h:http"],
            Rule::Port,
        );
        for bad in ["a;b:1", "a/b:1", "[fd00::g]:1", "[]:1"] {
            assert!(
                matches!(rule(endpoint, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn dns_labels_and_subdomains_are_lowercase_parts_that_start_and_end_alphanumeric() {
        accepts(dns_label, &["pre-check", "a", "7zip", "check-network-2"]);
        for bad in ["Check", "a_b", "a.b"] {
            assert!(
                matches!(rule(dns_label, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
        for bad in ["a-", "-a"] {
            assert!(
                matches!(rule(dns_label, bad), Some(Rule::Edges(_))),
                "{bad:?}"
            );
        }
        accepts(
            dns_subdomain,
            &["node-1", "ip-10-0-0-1.ec2.internal", "a.b"],
        );
        for bad in ["node-1.", ".node", "a..b", "a.-b", "a-.b"] {
            assert!(
                matches!(rule(dns_subdomain, bad), Some(Rule::Edges(_))),
                "{bad:?}"
            );
        }
        for bad in ["Node-1", "node_1", "node:1", "node/1"] {
            assert!(
                matches!(rule(dns_subdomain, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_role_is_a_label_value() {
        accepts(role, &["Master", "Worker", "etcd", "control_plane.v2"]);
        for bad in ["worker,master", "a:b", "a/b", "a*"] {
            assert!(
                matches!(rule(role, bad), Some(Rule::Characters(_))),
                "{bad:?}"
            );
        }
        for bad in ["_a", "a.", "-a"] {
            assert!(matches!(rule(role, bad), Some(Rule::Edges(_))), "{bad:?}");
        }
    }

    #[test]
    fn services_os_ids_users_images_and_env_names_keep_to_their_characters() {
        accepts(
            service_name,
            &["chronyd", "getty@tty1.service", "systemd-journald"],
        );
        assert!(matches!(
            rule(service_name, "a;b"),
            Some(Rule::Characters(_))
        ));
        assert!(matches!(rule(service_name, "@a"), Some(Rule::Edges(_))));
        accepts(os_id, &["debian", "rhel", "opensuse-leap", "sles_sap"]);
        assert!(matches!(rule(os_id, "Debian"), Some(Rule::Characters(_))));
        assert!(matches!(rule(os_id, ".x"), Some(Rule::Edges(_))));
        accepts(
            user_name,
            &["root", "ops", "svc_deploy", "alice@corp.example"],
        );
        assert!(matches!(rule(user_name, "a;b"), Some(Rule::Characters(_))));
        accepts(
            image,
            &[
                "busybox",
                "busybox:1.36",
                "registry.k8s.io/pause:3.10",
                "r/x@sha256:0a",
            ],
        );
        assert!(matches!(rule(image, "a$b"), Some(Rule::Characters(_))));
        assert!(matches!(rule(image, "/a"), Some(Rule::Edges(_))));
        accepts(env_name, &["A", "WORKFLOW_SSH_USER", "a.b-c"]);
        assert!(matches!(rule(env_name, "1A"), Some(Rule::Edges(_))));
        assert!(matches!(rule(env_name, "A=B"), Some(Rule::Characters(_))));
    }

    #[test]
    fn a_cluster_name_is_bounded_and_free_of_control_characters_only() {
        accepts(cluster_name, &["", "test-cluster", "Prod EU 1", "集群"]);
        assert_eq!(rule(cluster_name, "a\u{1b}b"), Some(Rule::Control));
    }

    #[test]
    fn each_names_the_word_by_its_index() {
        let list = ["chrony", "ok", "-x"];
        let e = each("spec.params.setup.packages", &list, package_name).unwrap_err();
        assert_eq!(e.field, "spec.params.setup.packages[2]");
        assert_eq!(each("p", &["a", "b"], package_name), Ok(()));
        let owned: Vec<String> = vec!["a".into()];
        assert_eq!(each("p", &owned, package_name), Ok(()));
    }
}
