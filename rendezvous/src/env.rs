//! [`Env`]: who this process is in a multi-process run, read from torchrun's
//! environment variables (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
//! `MASTER_PORT`), as set by `tofu launch`, torchrun or any other launcher.
//!
//! Keeps true: an `Env` that left [`Env::from_env`] has `rank < world_size`
//! and a non-zero port; a bad value is an error naming the variable and the
//! value.

use crate::RendezvousError;
use std::time::Duration;

/// The variables [`Env::from_env`] reads, in the order it checks them.
pub const VARS: [&str; 5] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
];

/// One process's place in a multi-process run (torchrun's conventions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// Global rank, `0..world_size` (`RANK`). Rank 0 hosts the rendezvous.
    pub rank: usize,
    /// Rank on this node, e.g. the GPU index (`LOCAL_RANK`; `RANK` when
    /// unset).
    pub local_rank: usize,
    /// Number of processes in the run, over all nodes (`WORLD_SIZE`).
    pub world_size: usize,
    /// Host name or IP address of rank 0's node (`MASTER_ADDR`).
    pub master_addr: String,
    /// TCP port of rank 0's rendezvous, 1..=65535 (`MASTER_PORT`).
    pub master_port: u16,
}

impl Env {
    /// Read the process environment. `Ok(None)` when neither `RANK` nor
    /// `WORLD_SIZE` is set (not started by a launcher); an error naming the
    /// variable when one is set without the other, when `MASTER_ADDR` or
    /// `MASTER_PORT` is missing, or when a value is not a number in range.
    pub fn from_env() -> Result<Option<Env>, RendezvousError> {
        Env::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`Env::from_env`] over any variable lookup (`var name → value`), e.g.
    /// a map in tests.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Env>, RendezvousError> {
        let rank_s = lookup("RANK");
        let world_s = lookup("WORLD_SIZE");
        let (rank_s, world_s) = match (rank_s, world_s) {
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(missing("WORLD_SIZE", "RANK is set")),
            (None, Some(_)) => return Err(missing("RANK", "WORLD_SIZE is set")),
            (Some(r), Some(w)) => (r, w),
        };
        let rank = number("RANK", &rank_s)?;
        let world_size = number("WORLD_SIZE", &world_s)?;
        if world_size == 0 {
            return Err(bad("WORLD_SIZE", &world_s, "must be at least 1"));
        }
        if rank >= world_size {
            return Err(bad(
                "RANK",
                &rank_s,
                &format!("must be below WORLD_SIZE={world_size}"),
            ));
        }
        let local_rank = match lookup("LOCAL_RANK") {
            Some(v) => number("LOCAL_RANK", &v)?,
            None => rank,
        };
        let master_addr = lookup("MASTER_ADDR")
            .ok_or_else(|| missing("MASTER_ADDR", "RANK and WORLD_SIZE are set"))?;
        if master_addr.trim().is_empty() {
            return Err(bad("MASTER_ADDR", &master_addr, "is empty"));
        }
        let port_s = lookup("MASTER_PORT")
            .ok_or_else(|| missing("MASTER_PORT", "RANK and WORLD_SIZE are set"))?;
        let master_port: u16 = port_s
            .trim()
            .parse()
            .map_err(|_| bad("MASTER_PORT", &port_s, "not a port number (1..=65535)"))?;
        if master_port == 0 {
            return Err(bad(
                "MASTER_PORT",
                &port_s,
                "port 0 cannot be shared with other processes",
            ));
        }
        Ok(Some(Env {
            rank,
            local_rank,
            world_size,
            master_addr: master_addr.trim().to_string(),
            master_port,
        }))
    }

    /// The variables that describe this `Env` to a child process, in
    /// [`VARS`] order (what `tofu launch` sets).
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("RANK", self.rank.to_string()),
            ("LOCAL_RANK", self.local_rank.to_string()),
            ("WORLD_SIZE", self.world_size.to_string()),
            ("MASTER_ADDR", self.master_addr.clone()),
            ("MASTER_PORT", self.master_port.to_string()),
        ]
    }

    /// `MASTER_ADDR:MASTER_PORT` as text (IPv6 addresses in brackets).
    pub fn master(&self) -> String {
        if self.master_addr.contains(':') && !self.master_addr.starts_with('[') {
            format!("[{}]:{}", self.master_addr, self.master_port)
        } else {
            format!("{}:{}", self.master_addr, self.master_port)
        }
    }

    /// Check what `from_env` guarantees, for an `Env` built by hand.
    pub(crate) fn validate(&self) -> Result<(), RendezvousError> {
        if self.world_size == 0 {
            return Err(RendezvousError::InvalidEnv("world_size is 0".into()));
        }
        if self.rank >= self.world_size {
            return Err(RendezvousError::InvalidEnv(format!(
                "rank {} is not below world_size {}",
                self.rank, self.world_size
            )));
        }
        if self.master_port == 0 {
            return Err(RendezvousError::InvalidEnv("master_port is 0".into()));
        }
        Ok(())
    }
}

fn number(var: &'static str, value: &str) -> Result<usize, RendezvousError> {
    value
        .trim()
        .parse()
        .map_err(|_| bad(var, value, "not a non-negative integer"))
}

fn bad(var: &'static str, value: &str, reason: &str) -> RendezvousError {
    RendezvousError::BadVar {
        var,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn missing(var: &'static str, reason: &str) -> RendezvousError {
    RendezvousError::MissingVar {
        var,
        reason: format!("required because {reason}"),
    }
}

/// A positive, finite number of seconds (`"600"`, `"2.5"`) as a
/// [`Duration`]: the parser of `--comm-timeout` and `--heartbeat-timeout`.
///
/// Errors: the text, and what a timeout must be.
pub fn seconds(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "`{text}` is not a timeout: give a positive number of seconds, e.g. 600"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<Option<Env>, RendezvousError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::from_lookup(|k| m.get(k).cloned())
    }

    const OK: [(&str, &str); 5] = [
        ("RANK", "3"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];

    fn with(var: &str, value: Option<&str>) -> Vec<(&'static str, String)> {
        OK.iter()
            .filter(|(k, _)| *k != var)
            .map(|(k, v)| (*k, v.to_string()))
            .chain(value.map(|v| (VARS.into_iter().find(|k| *k == var).unwrap(), v.to_string())))
            .collect()
    }

    fn read_with(var: &str, value: Option<&str>) -> Result<Option<Env>, RendezvousError> {
        let v = with(var, value);
        let refs: Vec<(&str, &str)> = v.iter().map(|(k, v)| (*k, v.as_str())).collect();
        read(&refs)
    }

    #[test]
    fn absent_is_none_and_complete_roundtrips() {
        assert!(read(&[]).unwrap().is_none());
        let env = read(&OK).unwrap().unwrap();
        assert_eq!(
            env,
            Env {
                rank: 3,
                local_rank: 1,
                world_size: 4,
                master_addr: "10.0.0.1".into(),
                master_port: 29500
            }
        );
        let back: Vec<(&str, String)> = env.vars();
        let refs: Vec<(&str, &str)> = back.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(read(&refs).unwrap().unwrap(), env);
        assert_eq!(env.master(), "10.0.0.1:29500");
        // LOCAL_RANK defaults to RANK.
        assert_eq!(
            read_with("LOCAL_RANK", None).unwrap().unwrap().local_rank,
            3
        );
    }

    /// Every bad value is an error naming the variable and its value.
    #[test]
    fn bad_values_name_the_variable() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("RANK", Some("x"), "RANK=\"x\""),
            ("RANK", Some("-1"), "RANK=\"-1\""),
            ("RANK", Some("4"), "RANK=\"4\""),
            ("WORLD_SIZE", Some("0"), "WORLD_SIZE=\"0\""),
            ("WORLD_SIZE", Some("four"), "WORLD_SIZE=\"four\""),
            ("WORLD_SIZE", None, "WORLD_SIZE is not set"),
            ("RANK", None, "RANK is not set"),
            ("LOCAL_RANK", Some("1.5"), "LOCAL_RANK=\"1.5\""),
            ("MASTER_ADDR", None, "MASTER_ADDR is not set"),
            ("MASTER_ADDR", Some(" "), "MASTER_ADDR=\" \""),
            ("MASTER_PORT", None, "MASTER_PORT is not set"),
            ("MASTER_PORT", Some("70000"), "MASTER_PORT=\"70000\""),
            ("MASTER_PORT", Some("0"), "MASTER_PORT=\"0\""),
        ];
        for (var, value, needle) in cases {
            let e = read_with(var, *value).expect_err(&format!("{var}={value:?} accepted"));
            let msg = e.to_string();
            assert!(msg.contains(needle), "{var}={value:?}: {msg}");
        }
    }

    #[test]
    fn timeouts_are_positive_finite_seconds() {
        assert_eq!(super::seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(super::seconds("600"), Ok(Duration::from_secs(600)));
        for bad in ["0", "-1", "inf", "NaN", "ten", ""] {
            let e = super::seconds(bad).unwrap_err();
            assert!(
                e.contains(&format!("`{bad}`")) && e.contains("positive"),
                "{e}"
            );
        }
    }
}
