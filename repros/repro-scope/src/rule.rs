//! F3's verdict rule (PREREG F3), kept apart from the report so that the verdict and the
//! controls of its path (`controls::SamplerRuns`) judge with the same function.

use crate::decode::Trajectory;
use report::Verdict;

/// The verdict's rule over the trajectories it judges (each against `all`): `present` when
/// some divergence is decisive, `undecided` when every divergence rests on an exact tie (or
/// nothing in the symmetric difference explains it), `absent` when none diverges. The planted
/// penalties samplers are judged by this same function
/// ([`crate::controls::SamplerRuns::reads`]).
pub fn measured<'a>(trajectories: impl IntoIterator<Item = &'a Trajectory>) -> Verdict {
    let found = (trajectories.into_iter()).filter_map(|t| t.divergence.as_ref());
    // Whether any divergence is decisive; `None` when no scope diverges.
    match found.map(|d| d.decisive).max() {
        Some(true) => Verdict::Present,
        Some(false) => Verdict::Undecided,
        None => Verdict::Absent,
    }
}
