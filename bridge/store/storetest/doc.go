// Package storetest is the conformance suite of gridsub's stores: JobStore
// holds any bridge.Store to its contract, Durable holds a store.Store (the
// SQLite and the PostgreSQL store) to store.Store's, dumps included.
package storetest
