//! Building the lab: namespaces, veth links, addresses, the send-buffer
//! limits, and each link's receive work in a pinned NAPI thread.

use super::*;

impl Lab {
    /// Waits (at most three seconds) until every lab link reports its
    /// carrier, so the first frame after `up` is not lost to a link
    /// still negotiating.
    pub(super) fn wait_links_up(&self) -> Result<(), LabError> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        for e in [G0, D0, D1, S0] {
            let path = format!("/sys/class/net/{}/operstate", e.iface);
            loop {
                let state = self.exec(e.role, "cat", &[&path])?;
                if state.trim() == "up" {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(LabError::Command {
                        cmd: format!("wait for {} to come up", e.iface),
                        msg: format!("operstate is still {:?}", state.trim()),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(())
    }

    pub(super) fn make_namespaces(&self) -> Result<(), LabError> {
        for r in Role::ALL {
            run("ip", &["netns", "add", &self.ns(r)])?;
            self.exec(r, "ip", &["link", "set", "lo", "up"])?;
            // No IPv6 chatter (router solicitations, DAD) on the benchmark links.
            for k in ["all", "default"] {
                self.exec(
                    r,
                    "sysctl",
                    &["-q", "-w", &format!("net.ipv6.conf.{k}.disable_ipv6=1")],
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn make_links(&self) -> Result<(), LabError> {
        let q = self.queues().to_string();
        for (a, b) in [(G0, D0), (D1, S0)] {
            let (na, nb) = (self.ns(a.role), self.ns(b.role));
            run(
                "ip",
                &[
                    "link",
                    "add",
                    a.iface,
                    "netns",
                    &na,
                    "numtxqueues",
                    &q,
                    "numrxqueues",
                    &q,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    b.iface,
                    "netns",
                    &nb,
                    "numtxqueues",
                    &q,
                    "numrxqueues",
                    &q,
                ],
            )?;
        }
        for e in [G0, D0, D1, S0] {
            self.exec(
                e.role,
                "ip",
                &["link", "set", e.iface, "address", &e.mac.to_string()],
            )?;
            self.exec(
                e.role,
                "ip",
                &["addr", "add", &format!("{}/24", ip4(e.ip)), "dev", e.iface],
            )?;
            self.exec(e.role, "ip", &["link", "set", e.iface, "up"])?;
        }
        Ok(())
    }

    /// Routes through the DUT; the hosts find each other's MACs by ARP,
    /// as ordinary hosts do.
    pub(super) fn address(&self) -> Result<(), LabError> {
        self.exec(
            Role::Gen,
            "ip",
            &["route", "add", "198.19.0.0/24", "via", &ip4(D0.ip)],
        )?;
        self.exec(
            Role::Sink,
            "ip",
            &["route", "add", "198.18.0.0/24", "via", &ip4(D1.ip)],
        )?;
        Ok(())
    }

    /// Saves and raises the send-buffer limits for the packet engine
    /// (writable only in the initial namespace; `down` restores them).
    pub(super) fn raise_send_buffers(&self) -> Result<(), LabError> {
        let state = self.state_file();
        if !std::path::Path::new(&state).exists() {
            let saved = ["net.core.wmem_max", "net.core.wmem_default"]
                .iter()
                .filter_map(|k| sysctl_get(k).map(|v| format!("{k}={v}\n")))
                .collect::<String>();
            std::fs::write(&state, saved).map_err(|e| LabError::Command {
                cmd: format!("write {state}"),
                msg: e.to_string(),
            })?;
        }
        sysctl_set("net.core.wmem_max", &WMEM.to_string())?;
        sysctl_set("net.core.wmem_default", &WMEM.to_string())
    }

    /// GRO and threaded NAPI on every veth end, each NAPI thread pinned to
    /// its side's CPU, the sink's at [`SINK_NAPI_PRIO`], the others at the
    /// default priority; the end hosts' transmit offloads off, so that what
    /// they send is what a real wire carries (see [`WIRE_OFFLOADS`]); and the
    /// DUT's TSO, so that what it sends is received on the sink's side
    /// ([`DUT_OFFLOADS_OFF`]).
    pub(super) fn thread_receive_work(&self) -> Result<(), LabError> {
        use crate::napi_threads::{set_offload, Offload};
        for (e, cpu) in [(G0, GEN_CPU), (D0, DUT_CPU), (D1, DUT_CPU), (S0, GEN_CPU)] {
            self.in_netns(e.role, || {
                set_offload(e.iface, Offload::Gro, true)?;
                let off: &[Offload] = if e.role == Role::Dut {
                    &DUT_OFFLOADS_OFF
                } else {
                    &WIRE_OFFLOADS
                };
                for &o in off {
                    set_offload(e.iface, o, false)?;
                }
                Ok(())
            })?;
            self.write_sysfs(e.role, &format!("/sys/class/net/{}/threaded", e.iface), "1")?;
            if e.role == Role::Dut {
                let dir = format!("/sys/class/net/{}", e.iface);
                self.write_sysfs(
                    e.role,
                    &format!("{dir}/napi_defer_hard_irqs"),
                    &DUT_DEFER_IRQS.to_string(),
                )?;
                self.write_sysfs(
                    e.role,
                    &format!("{dir}/gro_flush_timeout"),
                    &DUT_COALESCE_NS.to_string(),
                )?;
            }
            let sink = e.iface == S0.iface;
            self.in_netns(e.role, || {
                for tid in crate::napi_threads::thread_ids(e.iface)? {
                    crate::napi_threads::pin(tid, cpu)?;
                    if sink {
                        let prio = crate::napi_threads::Sched::Fifo(SINK_NAPI_PRIO);
                        crate::napi_threads::set_sched(tid, prio)?;
                    } else {
                        // Time-shared, with the kernel's default slice.
                        crate::sys::slice::set_time_shared(tid, None)?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}
