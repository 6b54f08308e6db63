//! The NVRTC target of a device ([`nvrtc_target`]): its own machine code
//! where NVRTC knows its architecture, else PTX for the newest one NVRTC
//! knows below it. Needs no CUDA: in every build, and tested without a
//! device.

/// What NVRTC compiles a kernel to, by architecture number (`90` for
/// compute capability 9.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvrtcTarget {
    /// The device's machine code (`sm_XY`, a cubin).
    Sass(i32),
    /// PTX for a virtual architecture (`compute_XY`), JIT-compiled by the
    /// driver.
    Ptx(i32),
}

impl NvrtcTarget {
    /// NVRTC's option selecting this target.
    pub fn option(self) -> String {
        match self {
            NvrtcTarget::Sass(a) => format!("--gpu-architecture=sm_{a}"),
            NvrtcTarget::Ptx(a) => format!("--gpu-architecture=compute_{a}"),
        }
    }
}

/// The target for a device of compute capability `(major, minor)`, given
/// the architectures this NVRTC supports (`nvrtcGetSupportedArchs`; empty
/// where it cannot say): the device's own `sm_XY` when supported (or when
/// NVRTC cannot say), else PTX for the newest supported architecture below
/// the device's.
///
/// Errors: the device is older than every supported architecture (NVRTC
/// dropped it), with the fix.
pub fn nvrtc_target(capability: (i32, i32), supported: &[i32]) -> Result<NvrtcTarget, String> {
    let arch = capability.0 * 10 + capability.1;
    if supported.is_empty() || supported.contains(&arch) {
        return Ok(NvrtcTarget::Sass(arch));
    }
    match supported.iter().copied().filter(|&a| a < arch).max() {
        Some(a) => Ok(NvrtcTarget::Ptx(a)),
        None => Err(format!(
            "the device's compute capability {}.{} is older than every architecture this \
             NVRTC compiles for ({}): use an NVRTC from an older CUDA toolkit that still \
             supports sm_{arch}, or --backend cpu",
            capability.0,
            capability.1,
            supported
                .iter()
                .map(|a| format!("sm_{a}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_supported_device_gets_its_own_machine_code() {
        let archs = [75, 80, 86, 87, 89, 90, 100, 120];
        assert_eq!(nvrtc_target((9, 0), &archs), Ok(NvrtcTarget::Sass(90)));
        assert_eq!(nvrtc_target((8, 6), &archs), Ok(NvrtcTarget::Sass(86)));
        assert_eq!(NvrtcTarget::Sass(90).option(), "--gpu-architecture=sm_90");
        assert_eq!(
            NvrtcTarget::Ptx(80).option(),
            "--gpu-architecture=compute_80"
        );
    }

    #[test]
    fn a_device_newer_than_nvrtc_gets_ptx_for_the_newest_it_knows() {
        let archs = [75, 80, 86, 90];
        assert_eq!(nvrtc_target((10, 0), &archs), Ok(NvrtcTarget::Ptx(90)));
        assert_eq!(nvrtc_target((8, 9), &archs), Ok(NvrtcTarget::Ptx(86)));
    }

    #[test]
    fn nvrtc_that_cannot_say_compiles_for_the_device() {
        assert_eq!(nvrtc_target((9, 0), &[]), Ok(NvrtcTarget::Sass(90)));
    }

    #[test]
    fn a_device_nvrtc_dropped_is_an_error_with_the_fix() {
        let e = nvrtc_target((6, 1), &[75, 80, 90]).unwrap_err();
        assert!(
            e.contains("6.1") && e.contains("sm_75, sm_80, sm_90"),
            "{e}"
        );
        assert!(e.contains("older CUDA toolkit"), "{e}");
    }
}
