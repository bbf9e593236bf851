//! The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`...), read from `/proc/self` at each
//! scrape with the `procfs` crate. Where `/proc` cannot be read (another OS, a restricted
//! mount) they are left out of the scrape rather than failing it.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What one scrape reads about the process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSample {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
    /// Virtual memory, in bytes.
    pub virtual_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors; `None` when unlimited.
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessSample {
    /// This process, now; `None` where `/proc/self` cannot be read.
    #[cfg(target_os = "linux")]
    pub fn of_this_process() -> Option<Self> {
        use procfs::process::{LimitValue, Process};
        let process = Process::myself().ok()?;
        let stat = process.stat().ok()?;
        // Both are reported in clock ticks; a tick rate of 0 would be a broken kernel.
        let ticks = procfs::ticks_per_second().max(1) as f64;
        let max_fds = match process.limits().ok()?.max_open_files.soft_limit {
            LimitValue::Value(limit) => Some(limit),
            LimitValue::Unlimited => None,
        };
        Some(ProcessSample {
            cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
            resident_bytes: stat.rss.saturating_mul(procfs::page_size()),
            virtual_bytes: stat.vsize,
            open_fds: u64::try_from(process.fd_count().ok()?).unwrap_or(u64::MAX),
            max_fds,
            start_time_seconds: procfs::boot_time_secs().ok()? as f64
                + stat.starttime as f64 / ticks,
        })
    }

    /// No `/proc` to read here.
    #[cfg(not(target_os = "linux"))]
    pub fn of_this_process() -> Option<Self> {
        None
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let cpu = ConstCounter::new(self.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                Some(self.resident_bytes as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                Some(self.virtual_bytes as f64),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                Some(self.open_fds as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                self.max_fds.map(|limit| limit as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                Some(self.start_time_seconds),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

/// Reads [`ProcessSample::of_this_process`] at every scrape.
#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        match ProcessSample::of_this_process() {
            Some(sample) => sample.encode(&mut encoder),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_from_proc() {
        let sample = ProcessSample::of_this_process().unwrap();
        assert!(sample.resident_bytes > 1024 * 1024, "{sample:?}");
        assert!(sample.virtual_bytes >= sample.resident_bytes, "{sample:?}");
        assert!(sample.open_fds >= 3, "stdin, stdout, stderr: {sample:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // The test binary started less than an hour ago, and not in the future (a second of
        // slack: the boot time is whole seconds).
        assert!(
            sample.start_time_seconds <= now + 1.0 && sample.start_time_seconds > now - 3600.0,
            "{sample:?}, now {now}"
        );
    }

    #[test]
    fn a_sample_encodes_under_the_standard_names() {
        let sample = ProcessSample {
            cpu_seconds: 1.5,
            resident_bytes: 4096,
            virtual_bytes: 8192,
            open_fds: 7,
            max_fds: None,
            start_time_seconds: 1_700_000_000.0,
        };
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Fixed(sample)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "process_cpu_seconds_total 1.5",
            "process_resident_memory_bytes 4096.0",
            "process_virtual_memory_bytes 8192.0",
            "process_open_fds 7.0",
            "process_start_time_seconds 1700000000.0",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains("process_max_fds"),
            "unlimited: left out\n{text}"
        );
    }

    #[derive(Debug)]
    struct Fixed(ProcessSample);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            self.0.encode(&mut encoder)
        }
    }
}
