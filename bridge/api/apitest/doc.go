// Package apitest holds helpers for tests of the API's TLS listeners: a
// self-signed certificate generated at test time (never a committed key).
package apitest
