// Package trust holds what decides whom Baton trusts: the guard on the
// addresses egress may dial, and (as they arrive) identity, signatures, edge
// policy, trust labels and grants.
package trust
