// Package chaos tests that Capstan never loses what runs when its
// controller is killed at any moment: SIGKILL at random points of
// installs, upgrades and uninstalls with hooks, a restart each time, and
// then the invariants: no orphans, no never-delete kind deleted, no object
// applied twice with different content, no pre hook run again after its
// main apply, no post hook run again after it succeeded, every add-on
// Synced. `make test` runs 10 kills; `make chaos` runs 100.
package chaos
