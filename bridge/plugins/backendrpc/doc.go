// Package backendrpc carries a backends.Backend, with every optional
// capability, across the plugin boundary: Server (the plugin's side) and
// Client (the host's) side by side over proto/v1's Backend service, with
// the converters between the domain types and protobuf in convert.go.
//
// Errors keep their identity (PLUGIN-STYLE §5): the server sends every
// error kind the backend's error matches, and the client returns a
// *wire.RemoteError that unwraps to the same sentinels, so errors.Is and
// backends.Retryable answer as they do in process. A dead plugin is
// wire.ErrPluginExited (retryable); an unimplemented RPC is
// backends.ErrUnsupported.
//
// Optional capabilities are declared by the plugin at Configure and
// reported by Client.Capabilities (backends.Declarer). LinkEstimate and
// ConnErr take no ctx, so the client answers them from the last Ping.
// FetchOutputs streams the files: the plugin fetches into a private
// temporary directory, and the host writes each file under the local
// directory it named, through an os.Root.
package backendrpc
