package mux

// Watching the config file: a change to it starts a reload (reload.go).

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadDebounce is how long the config file must stay quiet before it is
// read: an editor's save is several events (write, or create + rename, then
// chmod), and a file half written must not be read.
const reloadDebounce = 200 * time.Millisecond

// watcher is the config file's watcher; Close closes it.
type watcher struct {
	fw *fsnotify.Watcher
}

func (w *watcher) close() { w.fw.Close() }

// WatchConfig reloads the config (Reload) whenever its file changes, until
// Close. It watches the file's directory, not the file: editors save by
// writing another file and renaming it over this one, which would end a
// watch on the file itself. A config file that is a symlink is watched
// where it points too (the target is what gets edited).
func (m *Mux) WatchConfig() error {
	abs, err := filepath.Abs(m.cfg.Path)
	if err != nil {
		return fmt.Errorf("watching the config file: %w", err)
	}
	files := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		files = append(files, real)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the config file: %w", err)
	}
	for _, f := range files {
		if err := fw.Add(filepath.Dir(f)); err != nil {
			fw.Close()
			return fmt.Errorf("watching the config file's directory %s: %w", filepath.Dir(f), err)
		}
	}
	w := &watcher{fw: fw}
	m.mu.Lock()
	if m.closed || m.watch != nil {
		m.mu.Unlock()
		fw.Close()
		return nil
	}
	m.watch = w
	m.mu.Unlock()
	m.goOwned(func() { m.watchLoop(w, files) })
	m.log.Debug("watching the config file for changes", "path", abs)
	return nil
}

// watchLoop reloads once the config file has had no event for
// reloadDebounce. It ends when Close closes the watcher.
func (m *Mux) watchLoop(w *watcher, files []string) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			// Chmod alone (a touch, a backup tool) changes nothing read.
			if ev.Op == fsnotify.Chmod || !slices.Contains(files, filepath.Clean(ev.Name)) {
				continue
			}
			timer.Reset(reloadDebounce)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			m.log.Warn("watching the config file", "err", err)
		case <-timer.C:
			m.Reload() // logs what it did, or why not
		case <-m.ctx.Done():
			return
		}
	}
}
