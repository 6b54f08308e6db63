//! Two network namespaces joined by a veth pair, made by a test (`ip netns
//! add`, root and iproute2): host A at `SUBNET.1`, host B at `SUBNET.2`, each
//! with loopback and its end of the link up. The link can be cut (`ip link
//! set … down`: no FIN, no RST, what a failed switch or a vanished host
//! looks like) and the processes left in a namespace listed. The namespaces,
//! and with them the veth pair, are deleted on drop, failed test or not.

use std::process::Command;

/// Run `ip ARGS`; the error says what failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Network namespaces made for a test; deleted on drop.
pub struct Netns {
    names: Vec<String>,
    subnet: String,
}

impl Netns {
    /// Two namespaces `tofu-TAG-PID-{a,b}` joined by a veth pair, A at
    /// `SUBNET.1/24` and B at `SUBNET.2/24` (`subnet` e.g. `"10.213.0"`).
    ///
    /// Errors: the `ip` command that failed (not root, no iproute2).
    pub fn pair(tag: &str, subnet: &str) -> Result<Netns, String> {
        let pid = std::process::id();
        let names = [format!("tofu-{tag}-{pid}-a"), format!("tofu-{tag}-{pid}-b")];
        let mut made = Netns {
            names: Vec::new(),
            subnet: subnet.to_string(),
        };
        for n in &names {
            ip(&["netns", "add", n])?;
            made.names.push(n.clone());
        }
        let (a, b) = (names[0].as_str(), names[1].as_str());
        ip(&[
            "link", "add", "veth0", "netns", a, "type", "veth", "peer", "name", "veth1", "netns", b,
        ])?;
        ip(&[
            "-n",
            a,
            "addr",
            "add",
            &format!("{subnet}.1/24"),
            "dev",
            "veth0",
        ])?;
        ip(&[
            "-n",
            b,
            "addr",
            "add",
            &format!("{subnet}.2/24"),
            "dev",
            "veth1",
        ])?;
        for (n, dev) in [(a, "veth0"), (b, "veth1")] {
            ip(&["-n", n, "link", "set", dev, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }

    /// Host `i`'s (0 = A, 1 = B) namespace name.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// Host `i`'s address.
    pub fn ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// `ip netns exec NAME PROGRAM`: a command that runs on host `i`.
    pub fn command(&self, i: usize, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name(i)]).arg(program);
        c
    }

    /// Take the link down (`up = false`) or up again, at A's end.
    ///
    /// Errors: the `ip` command that failed.
    pub fn set_link(&self, up: bool) -> Result<(), String> {
        let state = if up { "up" } else { "down" };
        ip(&["-n", self.name(0), "link", "set", "veth0", state])
    }

    /// The processes still running in host `i`'s namespace (`ip netns pids`).
    pub fn pids(&self, i: usize) -> Vec<u32> {
        Command::new("ip")
            .args(["netns", "pids", self.name(i)])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// The namespaces for a test, or `None` after printing `SKIPPED:` with the
/// reason where they cannot be made (not root); under `CI` that is a
/// failure (CI runs as root, and these tests must run there).
pub fn pair_or_skip(tag: &str, subnet: &str) -> Option<Netns> {
    match Netns::pair(tag, subnet) {
        Ok(n) => Some(n),
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot make network namespaces under CI: {why}"
            );
            eprintln!("SKIPPED: cannot make network namespaces: {why}");
            None
        }
    }
}
