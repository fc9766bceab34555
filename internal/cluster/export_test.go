package cluster

// LeaseKey is leaseKey, for the tests that write a lease's key as another
// node would.
var LeaseKey = leaseKey
