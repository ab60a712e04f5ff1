package jobfile

// Inputs that already lie at a site: an `inputs` entry
//
//	- {site: Harbin, path: data/big.dat, size: 2GiB, remote: big.dat}
//
// names a file below the site's remote_dir instead of a file on this
// machine. It is an input like the others (it appears under remote in the
// job directory), so the job reads it the same way wherever it runs; where
// it lies is what the planner sees (the data's origin and size, priced
// with the link from that site) and what staging uses (linked in place at
// that site, relayed through the broker to any other).

import (
	"path"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
)

// SiteInput is an input that already lies at a site.
type SiteInput struct {
	Site   string // the site it lies at
	Path   string // relative to that site's remote_dir
	Size   int64  // declared size in bytes (> 0): priced by the planner, the most ever copied
	Remote string // path relative to the job directory (default: the base name of Path)

	field string // "inputs[i]", for error positions
}

// siteOnly returns the first key of an input mapping that only an input
// at a site may have ("" when none).
func siteOnly(f map[string]entry) string {
	for _, k := range []string{"path", "size"} {
		if _, ok := f[k]; ok {
			return k
		}
	}
	return ""
}

// siteInput parses an inputs entry with site: (fields already read into f).
func (p *parser) siteInput(it *yaml.Node, field string, f map[string]entry, j *Job, seen map[string]int) {
	for _, k := range []string{"local", "mode"} {
		if kv, ok := f[k]; ok {
			p.fail(kv.key, field+"."+k, ErrConflict, "an input that lies at a site (site:) has no %s: it is linked or copied as it is there; give {site, path, size, remote}", k)
			return
		}
	}
	in := SiteInput{field: field}
	ok := true
	kv := f["site"]
	if v, good := p.text(kv.val, field+".site", "a site name"); good && p.siteName(kv.val, field+".site", v) {
		in.Site = v
	} else {
		ok = false
	}
	if kv, has := f["path"]; !has {
		p.fail(it, field+".path", ErrRequired, "missing; give the file's path relative to the site's remote_dir, e.g. data/big.dat")
		ok = false
	} else if v, good := p.text(kv.val, field+".path", "a path relative to the site's remote_dir"); good {
		c, err := jobrules.SiteFilePath(v)
		if p.rule(kv.val, field+".path", err) {
			in.Path = c
		} else {
			ok = false
		}
	} else {
		ok = false
	}
	if kv, has := f["size"]; !has {
		p.fail(it, field+".size", ErrRequired, "missing; give the file's size (%s): the planner prices moving it, and no more is ever copied", sizeHint)
		ok = false
	} else if v, good := p.text(kv.val, field+".size", sizeHint); good {
		n, err := ParseSize(v)
		if err != nil {
			p.fail(kv.val, field+".size", ErrValue, "%v", err)
			ok = false
		} else if p.rule(kv.val, field+".size", jobrules.SiteFileSize(n)) {
			in.Size = n
		} else {
			ok = false
		}
	} else {
		ok = false
	}
	if !ok {
		return
	}
	rfield, rnode := field+".path", f["path"].val
	in.Remote = path.Base(in.Path)
	if kv, has := f["remote"]; has {
		rfield, rnode = field+".remote", kv.val
		s, good := p.text(kv.val, rfield, "a path relative to the job directory")
		if !good {
			return
		}
		c, good := p.relPath(kv.val, rfield, s, false)
		if !good {
			return
		}
		if len(c) > 0 && c[len(c)-1] == '/' {
			c += path.Base(in.Path)
		}
		in.Remote = c
	}
	if line, dup := seen[in.Remote]; dup {
		p.fail(rnode, rfield, ErrValue, "remote name %q is already used by the input at line %d; give a distinct remote name", in.Remote, line)
		return
	}
	seen[in.Remote] = rnode.Line
	if len(j.SiteInputs) > 0 && j.SiteInputs[0].Site != in.Site {
		p.fail(f["site"].val, field+".site", ErrConflict, "all inputs that lie at a site must lie at the same one (the planner models one data origin per job, SPEC.md §4); %s, not %s", j.SiteInputs[0].Site, in.Site)
		return
	}
	j.SiteInputs = append(j.SiteInputs, in)
}

// siteData checks that scheduling.origin and scheduling.data_size, when
// given beside inputs that lie at a site, agree with them: the inputs say
// where the data is (their site) and how much (their sizes' sum). Called
// once the whole file is parsed.
func (p *parser) siteData(j *Job) {
	if len(j.SiteInputs) == 0 {
		return
	}
	site, total := j.SiteInputs[0].Site, j.SiteDataSize()
	if o := j.Scheduling.Origin; o != "" && o != site {
		p.failAt(p.pos["scheduling.origin"], "scheduling.origin", ErrConflict, "is %s, but the inputs that lie at a site lie at %s: the data's origin is where they lie (drop scheduling.origin)", o, site)
	}
	if n := j.Scheduling.DataSize; n > 0 && n != total {
		p.failAt(p.pos["scheduling.data_size"], "scheduling.data_size", ErrConflict, "is %d bytes, but the inputs that lie at %s declare %d in all (drop scheduling.data_size)", n, site, total)
	}
}

// SiteDataSize is the declared size of the inputs that lie at a site.
func (j *Job) SiteDataSize() int64 {
	var n int64
	for _, in := range j.SiteInputs {
		n += in.Size
	}
	return n
}

// DataOrigin is where the job's data lies for the planner and how much of
// it there is: the site of its inputs at a site and their size, else
// scheduling.origin and scheduling.data_size.
func (j *Job) DataOrigin() (string, int64) {
	if len(j.SiteInputs) > 0 {
		return j.SiteInputs[0].Site, j.SiteDataSize()
	}
	return j.Scheduling.Origin, j.Scheduling.DataSize
}

// SiteFiles are the inputs that lie at a site as the backends name them.
func (j *Job) SiteFiles() []backends.SiteFile {
	var out []backends.SiteFile
	for _, in := range j.SiteInputs {
		out = append(out, backends.SiteFile{Site: in.Site, Path: in.Path, Size: in.Size, Remote: in.Remote})
	}
	return out
}
