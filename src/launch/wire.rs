//! The PMI wire formats, as pure functions over bytes (the transcripts are
//! in `../shared/reference/launchers.md`, §1 and §2).
//!
//! * **PMI-1**: one ASCII line per message, `cmd=NAME key=value ...\n`.
//!   Fields are separated by spaces, so neither keys nor values may hold
//!   one; a value may hold `=` (only the first `=` of a field splits it).
//! * **PMI-2**: after a PMI-1 style `init` line, every message is framed as
//!   6 ASCII bytes of decimal length (MPICH left-justifies them, Hydra
//!   right-justifies its replies and Slurm left-justifies them, so the
//!   number is trimmed before it is parsed) and a payload
//!   `cmd=NAME;key=value;...;`. The protocol escapes a `;` inside a value
//!   as `;;`; replies are decoded that way, but neither Hydra nor Slurm
//!   decodes it in requests (both cut the value at the `;`), so requests
//!   never carry a `;`: a key or value with one is refused.
//!
//! A reply is a [`Reply`]: its command and its fields as a map (the field
//! order differs between Hydra and Slurm, and only Slurm sends `rc=0` on
//! every reply).

use std::collections::BTreeMap;

use crate::error::{shorten, LaunchError};

/// The longest PMI-1 line or PMI-2 payload a reply may have (PMI-2's length
/// prefix allows 999,999 bytes; the servers' values are at most 1024).
pub(crate) const MAX_REPLY: usize = 64 * 1024;

/// Bytes of a PMI-2 frame's length prefix.
pub(crate) const PMI2_PREFIX: usize = 6;

/// A request or reply: its `cmd` and its other fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The `cmd` field.
    pub(crate) cmd: String,
    /// The other fields, by key (a repeated key keeps its last value).
    pub(crate) fields: BTreeMap<String, String>,
    /// The reply as received, for messages.
    pub(crate) text: String,
}

impl Reply {
    /// The field `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The field `key`, or an error naming it.
    pub(crate) fn require(&self, command: &str, key: &str) -> Result<&str, LaunchError> {
        self.get(key)
            .ok_or_else(|| self.malformed(command, format!("no {key}= field")))
    }

    /// The field `key` as an integer.
    pub(crate) fn int(&self, command: &str, key: &str) -> Result<i64, LaunchError> {
        let v = self.require(command, key)?;
        v.trim()
            .parse()
            .map_err(|_| self.malformed(command, format!("{key}={v:?} is not a number")))
    }

    /// `Ok` unless the reply carries an `rc` other than 0 (a reply without
    /// `rc` succeeded: Hydra sends none on most replies).
    pub(crate) fn check_rc(&self, command: &str) -> Result<(), LaunchError> {
        let rc = match self.get("rc") {
            None => return Ok(()),
            Some(_) => self.int(command, "rc")?,
        };
        if rc == 0 {
            return Ok(());
        }
        Err(LaunchError::Refused {
            command: command.to_string(),
            rc,
            message: self.get("msg").map(str::to_string),
        })
    }

    /// An error: this reply is not what `command` expects.
    pub(crate) fn malformed(&self, command: &str, problem: impl Into<String>) -> LaunchError {
        LaunchError::Malformed {
            command: command.to_string(),
            problem: problem.into(),
            reply: shorten(&self.text),
        }
    }

    /// `Ok` if the reply's command is `expected`.
    pub(crate) fn expect_cmd(&self, command: &str, expected: &str) -> Result<(), LaunchError> {
        if self.cmd == expected {
            Ok(())
        } else {
            Err(self.malformed(command, format!("expected cmd={expected}")))
        }
    }
}

/// Checks that `text` may travel as a PMI key (`is_key`) or value: no
/// space, tab, newline, NUL or `;`, and in a key no `=`.
pub(crate) fn check_text(what: &'static str, text: &str, is_key: bool) -> Result<(), LaunchError> {
    let bad = text
        .chars()
        .find(|&c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\0' | ';') || (is_key && c == '='));
    match bad {
        None if is_key && text.is_empty() => Err(LaunchError::EmptyKey),
        None => Ok(()),
        Some(byte) => Err(LaunchError::BadByte {
            what,
            text: shorten(text),
            byte,
        }),
    }
}

/// A PMI-1 request line: `cmd=NAME k=v ...\n`. The caller has checked the
/// fields with [`check_text`].
pub(crate) fn pmi1_line(cmd: &str, fields: &[(&str, &str)]) -> String {
    let mut line = format!("cmd={cmd}");
    for (k, v) in fields {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    line.push('\n');
    line
}

/// Parses a PMI-1 reply line (without its newline) for `command`.
pub(crate) fn parse_pmi1(command: &str, line: &str) -> Result<Reply, LaunchError> {
    let mut reply = Reply {
        cmd: String::new(),
        fields: BTreeMap::new(),
        text: line.to_string(),
    };
    let mut cmd = None;
    for token in line.split_ascii_whitespace() {
        let Some((k, v)) = token.split_once('=') else {
            return Err(reply.malformed(command, format!("the field {token:?} has no '='")));
        };
        if k.is_empty() {
            return Err(reply.malformed(command, format!("the field {token:?} has no key")));
        }
        if k == "cmd" {
            cmd = Some(v.to_string());
        } else {
            reply.fields.insert(k.to_string(), v.to_string());
        }
    }
    match cmd {
        Some(c) => reply.cmd = c,
        None => return Err(reply.malformed(command, "no cmd= field")),
    }
    Ok(reply)
}

/// A PMI-2 frame: the 6-byte length (left-justified, as MPICH's client
/// writes it) and the payload `cmd=NAME;k=v;...;`. The caller has checked
/// the fields with [`check_text`]; a payload too long for the prefix is an
/// error.
pub(crate) fn pmi2_frame(cmd: &str, fields: &[(&str, &str)]) -> Result<Vec<u8>, LaunchError> {
    let mut payload = format!("cmd={cmd};");
    for (k, v) in fields {
        payload.push_str(k);
        payload.push('=');
        payload.push_str(v);
        payload.push(';');
    }
    if payload.len() > 999_999 {
        return Err(LaunchError::TooLong {
            what: "message",
            len: payload.len(),
            max: 999_999,
            limit: "PMI-2's 6-digit length prefix".to_string(),
        });
    }
    let mut frame = format!("{:<width$}", payload.len(), width = PMI2_PREFIX).into_bytes();
    frame.extend_from_slice(payload.as_bytes());
    Ok(frame)
}

/// The payload length a PMI-2 prefix announces (spaces on either side
/// trimmed), at most [`MAX_REPLY`].
pub(crate) fn parse_pmi2_len(command: &str, prefix: &[u8]) -> Result<usize, LaunchError> {
    let text = String::from_utf8_lossy(prefix);
    let malformed = |problem: String| LaunchError::Malformed {
        command: command.to_string(),
        problem,
        reply: text.to_string(),
    };
    let n: usize = text
        .trim_matches(' ')
        .parse()
        .map_err(|_| malformed("the 6-byte length prefix is not a number".to_string()))?;
    if n > MAX_REPLY {
        return Err(malformed(format!(
            "the length {n} is more than the {MAX_REPLY} bytes a reply may have"
        )));
    }
    Ok(n)
}

/// Parses a PMI-2 payload `cmd=NAME;k=v;...;` for `command`: `;;` inside a
/// value is a `;`; the last field's `;` may be missing.
pub(crate) fn parse_pmi2(command: &str, payload: &str) -> Result<Reply, LaunchError> {
    let mut reply = Reply {
        cmd: String::new(),
        fields: BTreeMap::new(),
        text: payload.to_string(),
    };
    let mut cmd = None;
    let mut rest = payload;
    while !rest.is_empty() {
        // The key runs to '='; the value to the first ';' not doubled.
        let Some(eq) = rest.find('=') else {
            return Err(reply.malformed(command, format!("the field {rest:?} has no '='")));
        };
        let key = &rest[..eq];
        if key.is_empty() || key.contains(';') {
            return Err(reply.malformed(command, format!("the field {key:?} has no key")));
        }
        let mut value = String::new();
        let bytes = rest.as_bytes();
        let mut i = eq + 1;
        loop {
            match bytes.get(i) {
                None => break,
                Some(b';') if bytes.get(i + 1) == Some(&b';') => {
                    value.push(';');
                    i += 2;
                }
                Some(b';') => {
                    i += 1;
                    break;
                }
                Some(_) => {
                    let start = i;
                    while i < bytes.len() && bytes[i] != b';' {
                        i += 1;
                    }
                    value.push_str(&rest[start..i]);
                }
            }
        }
        if key == "cmd" {
            cmd = Some(value);
        } else {
            reply.fields.insert(key.to_string(), value);
        }
        rest = &rest[i..];
    }
    match cmd {
        Some(c) => reply.cmd = c,
        None => return Err(reply.malformed(command, "no cmd= field")),
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmi1_lines_are_the_reference_bytes() {
        assert_eq!(
            pmi1_line("init", &[("pmi_version", "1"), ("pmi_subversion", "1")]),
            "cmd=init pmi_version=1 pmi_subversion=1\n"
        );
        assert_eq!(pmi1_line("barrier_in", &[]), "cmd=barrier_in\n");
    }

    #[test]
    fn pmi1_replies_parse_in_any_order() {
        let hydra = parse_pmi1(
            "init",
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
        )
        .unwrap();
        let slurm = parse_pmi1(
            "init",
            "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1",
        )
        .unwrap();
        assert_eq!(hydra.fields, slurm.fields);
        assert_eq!(hydra.cmd, "response_to_init");
        let get = parse_pmi1("get", "cmd=get_result rc=0 msg=success value=a=b=c").unwrap();
        assert_eq!(get.get("value"), Some("a=b=c"));
        assert_eq!(get.int("get", "rc").unwrap(), 0);
        let missing = parse_pmi1(
            "get",
            "cmd=get_result rc=-1 msg=key_no-such-key_not_found value=unknown",
        )
        .unwrap();
        assert_eq!(
            missing.check_rc("get"),
            Err(LaunchError::Refused {
                command: "get".into(),
                rc: -1,
                message: Some("key_no-such-key_not_found".into())
            })
        );
    }

    #[test]
    fn garbled_pmi1_replies_are_errors() {
        for bad in ["cmd=maxes junk", "kvsname_max=256", "=3 cmd=x", ""] {
            let err = parse_pmi1("get_maxes", bad).unwrap_err();
            assert!(
                matches!(err, LaunchError::Malformed { .. }),
                "{bad:?}: {err:?}"
            );
        }
        let r = parse_pmi1("get", "cmd=get_result rc=zero").unwrap();
        assert!(matches!(
            r.check_rc("get"),
            Err(LaunchError::Malformed { .. })
        ));
    }

    #[test]
    fn pmi2_frames_are_the_reference_bytes() {
        let f = pmi2_frame("fullinit", &[("pmirank", "0"), ("threaded", "FALSE")]).unwrap();
        assert_eq!(f, b"38    cmd=fullinit;pmirank=0;threaded=FALSE;");
        assert_eq!(
            pmi2_frame("job-getid", &[]).unwrap(),
            b"14    cmd=job-getid;"
        );
        assert_eq!(
            pmi2_frame(
                "kvs-put",
                &[("key", "addr-2"), ("value", "host-vm:pid=10766")]
            )
            .unwrap(),
            b"47    cmd=kvs-put;key=addr-2;value=host-vm:pid=10766;"
        );
    }

    #[test]
    fn pmi2_prefixes_are_trimmed_either_way() {
        assert_eq!(parse_pmi2_len("x", b"   113").unwrap(), 113);
        assert_eq!(parse_pmi2_len("x", b"114   ").unwrap(), 114);
        for bad in [&b"  -1  "[..], b"abcdef", b"      ", b"1 2   ", b"999999"] {
            assert!(parse_pmi2_len("x", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pmi2_payloads_parse_with_escapes() {
        let r = parse_pmi2(
            "fullinit",
            "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=4;appnum=0;\
             debugged=FALSE;pmiverbose=FALSE;rc=0;",
        )
        .unwrap();
        assert_eq!(r.cmd, "fullinit-response");
        assert_eq!(r.int("fullinit", "size").unwrap(), 4);
        let r = parse_pmi2("x", "cmd=kvs-get-response;found=TRUE;value=x;;y;rc=0;").unwrap();
        assert_eq!(r.get("value"), Some("x;y"));
        assert_eq!(r.get("rc"), Some("0"));
        let r = parse_pmi2("x", "cmd=a;v=b=c").unwrap();
        assert_eq!(r.get("v"), Some("b=c"));
        for bad in ["found=TRUE;", "cmd=a;junk;", "cmd=a;=x;"] {
            assert!(
                matches!(parse_pmi2("x", bad), Err(LaunchError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn texts_the_wire_cannot_carry_are_refused() {
        check_text("key", "addr-0", true).unwrap();
        check_text("value", "a=b", false).unwrap();
        for (text, is_key) in [
            ("a b", false),
            ("a;b", false),
            ("a\nb", false),
            ("a=b", true),
        ] {
            assert!(
                matches!(
                    check_text("x", text, is_key),
                    Err(LaunchError::BadByte { .. })
                ),
                "{text:?}"
            );
        }
        assert_eq!(check_text("key", "", true), Err(LaunchError::EmptyKey));
    }
}
