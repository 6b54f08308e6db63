//! Bytes: each rank sends exactly the bytes of the planner's transfers
//! ([`Programs::predicted_bytes_per_rank`](crate::generate::Programs::predicted_bytes_per_rank)),
//! counted as the communicator counts them ([`Program::bytes_sent`]).

use crate::program::Program;

/// Program `p` sends `predicted` bytes per step. Errors: both counts.
pub(super) fn check_bytes(p: &Program, predicted: u64) -> Result<(), String> {
    if p.bytes_sent() != predicted {
        return Err(format!(
            "sends {} bytes per step, the plan's transfers say {predicted}",
            p.bytes_sent()
        ));
    }
    Ok(())
}
