// Package regularfile reads the files a person names — a configuration
// file, an SSH key, a known_hosts file, a certificate, a token file, an
// experiment file — the one bounded way: the file is opened without
// blocking (a FIFO would wait for a writer forever), checked with fstat to
// be a regular file (a device such as /dev/zero never ends) of at most a
// given size, and read through a limit, so a file that grows while it is
// read is refused too.
//
//	b, err := regularfile.Read(path, 1<<20)
//
// Errors name the path and say what is wrong; errors.Is tells the cases
// apart (ErrNotRegular, ErrTooLarge; a missing or unreadable file keeps
// the os error: fs.ErrNotExist, fs.ErrPermission).
package regularfile
