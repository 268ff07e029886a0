"""OpInfo-based op suites: each module checks one property of every op on the device under test."""
