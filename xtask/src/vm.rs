//! Boots the guest under qemu (TCG), streams the command's output from
//! the second serial port, and returns the command's exit status.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::fetch::Fetched;
use crate::run_capture;

/// TX/RX queue pairs per virtio NIC.
pub const NIC_QUEUES: u32 = 16;

/// How to boot.
#[derive(Debug, Clone)]
pub struct Boot {
    /// qemu `-accel` (`tcg` or `kvm`).
    pub accel: String,
    /// Guest RAM in MiB.
    pub mem_mib: u32,
    /// vCPUs.
    pub cpus: u32,
    /// Two virtio-net NICs (ens19/ens20) on taps in a private host netns,
    /// wired to each other through a bridge there.
    pub nics: bool,
    /// Give up (and kill qemu) after this long.
    pub timeout: Duration,
    /// Also write the command's output to this file.
    pub tee: Option<PathBuf>,
}

/// A host network namespace holding the NICs' tap backends; removed on drop.
struct TapNetns {
    name: String,
}

/// Deletes `lqos-lab-PID` namespaces whose process is gone (a killed run).
fn remove_stale_netns() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(pid) = name.strip_prefix("lqos-lab-") {
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = Command::new("ip").args(["netns", "del", name]).output();
            }
        }
    }
}

impl TapNetns {
    fn create() -> Result<TapNetns> {
        remove_stale_netns();
        let name = format!("lqos-lab-{}", std::process::id());
        let ns_for_signal = name.clone();
        // Ctrl-C / SIGTERM: qemu gets the signal too; remove the namespace.
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            std::thread::spawn(move || {
                if signals.forever().next().is_some() {
                    let _ = Command::new("ip")
                        .args(["netns", "del", &ns_for_signal])
                        .output();
                    eprintln!("\nlab: interrupted; removed host netns {ns_for_signal}");
                    std::process::exit(130);
                }
            });
        }
        run_capture(Command::new("ip").args(["netns", "add", &name])).with_context(|| {
            format!("lab run --nics: creating host netns {name} for the taps (needs root)")
        })?;
        let ns = TapNetns { name };
        for tap in ["tap19", "tap20"] {
            run_capture(Command::new("ip").args([
                "-n",
                &ns.name,
                "tuntap",
                "add",
                "dev",
                tap,
                "mode",
                "tap",
                "multi_queue",
            ]))
            .with_context(|| format!("lab run --nics: creating {tap} in {}", ns.name))?;
            run_capture(Command::new("ip").args(["-n", &ns.name, "link", "set", tap, "up"]))?;
        }
        // The two NICs are wired to each other: a frame the guest sends on
        // ens19 arrives on ens20 and back (traffic through the virtio NICs,
        // e.g. VLAN-tagged flows through a stick).
        let ip = |args: &[&str]| {
            let mut c = Command::new("ip");
            c.args(["-n", &ns.name]).args(args);
            run_capture(&mut c)
                .with_context(|| format!("lab run --nics: ip {} in {}", args.join(" "), ns.name))
        };
        ip(&["link", "add", "wire", "type", "bridge"])?;
        for tap in ["tap19", "tap20"] {
            ip(&["link", "set", tap, "master", "wire"])?;
        }
        ip(&["link", "set", "wire", "up"])?;
        Ok(ns)
    }
}

impl Drop for TapNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Kills qemu if still running when dropped (errors, panics).
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Boots `initrd`, streams the guest command's output to stdout, and
/// returns its exit status (read from the `marker` line).
pub fn boot(f: &Fetched, initrd: &Path, console: &Path, boot: &Boot, marker: &str) -> Result<i32> {
    let netns = if boot.nics {
        Some(TapNetns::create()?)
    } else {
        None
    };
    let mut cmd = match &netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns.name]).arg(f.qemu());
            c
        }
        None => Command::new(f.qemu()),
    };
    cmd.env("LD_LIBRARY_PATH", f.ld_library_path());
    for d in f.firmware_dirs() {
        cmd.arg("-L").arg(d);
    }
    cmd.args(["-accel", &boot.accel, "-machine", "pc", "-nodefaults", "-no-reboot"])
        .args(["-display", "none", "-monitor", "none"])
        .args(["-m", &boot.mem_mib.to_string()])
        .args(["-smp", &boot.cpus.to_string()])
        .arg("-kernel")
        .arg(&f.kernel)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            "console=ttyS0 panic=-1 oops=panic rdinit=/init mitigations=off nokaslr tsc=reliable quiet loglevel=4",
        ])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .args(["-serial", "stdio"]);
    if boot.nics {
        for (i, slot) in [(19u32, 0x13u32), (20, 0x14)] {
            cmd.arg("-netdev").arg(format!(
                "tap,id=n{i},ifname=tap{i},script=no,downscript=no,vhost=off,queues={NIC_QUEUES}"
            ));
            cmd.arg("-device").arg(format!(
                "virtio-net-pci,netdev=n{i},mq=on,vectors={},addr={slot:#x},mac=52:54:00:00:00:{i},romfile=",
                2 * NIC_QUEUES + 2
            ));
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("lab run: starting {}", f.qemu().display()))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let mut qemu = Reaper(child);

    let (tx, rx) = mpsc::channel::<i32>();
    let marker_owned = marker.to_string();
    let tee = match &boot.tee {
        Some(p) => Some(
            std::fs::File::create(p)
                .with_context(|| format!("lab run: creating {}", p.display()))?,
        ),
        None => None,
    };
    let reader = std::thread::spawn(move || stream(stdout, &marker_owned, tx, tee));
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    let start = Instant::now();
    let mut status = None;
    let exited = loop {
        if status.is_none() {
            if let Ok(rc) = rx.try_recv() {
                status = Some((rc, Instant::now()));
            }
        }
        if let Some(st) = qemu.0.try_wait()? {
            break Some(st);
        }
        if let Some((_, at)) = status {
            // The guest powers off right after the marker; don't wait forever.
            if at.elapsed() > Duration::from_secs(20) {
                break None;
            }
        }
        if start.elapsed() > boot.timeout {
            drop(qemu);
            bail!(
                "lab run: timed out after {} s (the guest command was still running; kernel log: {})",
                boot.timeout.as_secs(),
                console.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(qemu);
    let _ = reader.join();
    if status.is_none() {
        status = rx.try_recv().ok().map(|rc| (rc, Instant::now()));
    }
    let qemu_err = err_reader.join().unwrap_or_default();
    drop(netns);
    match status {
        Some((rc, _)) => Ok(rc),
        None => {
            let log = std::fs::read_to_string(console).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            let why = if log.contains("Initramfs unpacking failed")
                || log.contains("Unable to mount root")
            {
                "the guest kernel panicked: the initramfs did not fit (try a larger --mem)"
            } else if log.contains("Kernel panic") {
                "the guest kernel panicked"
            } else if log.contains("Out of memory") {
                "the guest ran out of memory (try --mem)"
            } else if !qemu_err.trim().is_empty() {
                "qemu failed"
            } else {
                "the guest ended without reporting an exit status"
            };
            let qemu_err = match qemu_err.trim() {
                "" => String::new(),
                e => format!("\nqemu stderr: {e}"),
            };
            bail!(
                "lab run: {why} (qemu {}).{qemu_err}\nlast kernel log lines ({}):\n{}",
                exited
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "killed".into()),
                console.display(),
                tail.join("\n")
            )
        }
    }
}

/// Copies the guest's output to stdout (and `tee`) until the marker line,
/// whose number it sends.
fn stream(mut out: impl Read, marker: &str, tx: mpsc::Sender<i32>, mut tee: Option<std::fs::File>) {
    let mut stdout = std::io::stdout();
    let mut line = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\r' {
                continue;
            }
            line.push(b);
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line);
                if let Some(rc) = parse_marker(&text, marker) {
                    let _ = tx.send(rc);
                } else {
                    let _ = stdout.write_all(&line);
                    let _ = stdout.flush();
                    if let Some(f) = tee.as_mut() {
                        let _ = f.write_all(&line);
                    }
                }
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        let _ = stdout.write_all(&line);
    }
    let _ = stdout.flush();
}

fn parse_marker(line: &str, marker: &str) -> Option<i32> {
    line.trim_end().strip_prefix(marker)?.trim().parse().ok()
}

/// `target/lab/run-PID/`: one boot's initrd and kernel log.
pub fn run_dir(lab_dir: &Path) -> Result<PathBuf> {
    let d = lab_dir.join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("lab run: creating {}", d.display()))?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lines() {
        assert_eq!(parse_marker("@@lab-1-2 0\n", "@@lab-1-2"), Some(0));
        assert_eq!(parse_marker("@@lab-1-2 101", "@@lab-1-2"), Some(101));
        assert_eq!(parse_marker("echo @@lab-1-2 3", "@@lab-1-2"), None);
        assert_eq!(parse_marker("@@lab-1-2", "@@lab-1-2"), None);
    }
}
