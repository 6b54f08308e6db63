//! End-to-end tests of the `tofu` binary live in `tests/tests/`.
