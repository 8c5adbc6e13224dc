//! Integration tests live in `integration/`; this library is empty.
