//! Stamps the detector version (`builds::detector`): which code wrote this finding's reports.

fn main() {
    builds::detector::emit();
}
