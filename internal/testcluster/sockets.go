package testcluster

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Socket is one open TCP or UDP socket of a component.
type Socket struct {
	// Component is the process that holds it.
	Component string
	// Proto is tcp, tcp6, udp or udp6.
	Proto string
	// Local and Remote are its addresses.
	Local, Remote netip.AddrPort
	// State is the kernel's TCP state, in hex as /proc shows it ("01" is
	// established, "02" a connection being opened); UDP sockets have "07".
	State string
}

func (s Socket) String() string {
	return fmt.Sprintf("%s %s %s -> %s (state %s)", s.Component, s.Proto, s.Local, s.Remote, s.State)
}

// OffLoopbackSockets lists every socket that a component of the control
// plane holds toward an address off loopback, connected or being connected.
// It reads /proc, so it sees what the kernel sees, whatever path a
// connection took. Tests call it to check that the egress guard is the only
// way out.
func (c *Cluster) OffLoopbackSockets() ([]Socket, error) {
	c.procsMu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.procsMu.Unlock()
	var out []Socket
	for _, p := range procs {
		if p.cmd.Process == nil || p.exited() {
			continue
		}
		pid := p.cmd.Process.Pid
		inodes, err := socketInodes(pid)
		if err != nil {
			return nil, fmt.Errorf("testcluster: reading the sockets of %s: %w", p.name, err)
		}
		for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
			socks, err := readProcNet(filepath.Join("/proc", strconv.Itoa(pid), "net", proto), proto)
			if err != nil {
				return nil, fmt.Errorf("testcluster: reading the sockets of %s: %w", p.name, err)
			}
			for inode, s := range socks {
				if !inodes[inode] || !offLoopback(s.Remote.Addr()) {
					continue
				}
				s.Component = p.name
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// offLoopback reports whether a remote address is a real destination off
// loopback; an unconnected socket's remote address is unspecified.
func offLoopback(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback()
}

// socketInodes returns the inodes of the sockets that pid has open.
func socketInodes(pid int) (map[string]bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			out[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return out, nil
}

// readProcNet parses a /proc/<pid>/net/{tcp,tcp6,udp,udp6} table, keyed by
// inode.
func readProcNet(path, proto string) (map[string]Socket, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseProcNet(bufio.NewScanner(f), proto)
}

func parseProcNet(sc *bufio.Scanner, proto string) (map[string]Socket, error) {
	out := map[string]Socket{}
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, err := parseProcAddr(fields[1])
		if err != nil {
			return nil, err
		}
		remote, err := parseProcAddr(fields[2])
		if err != nil {
			return nil, err
		}
		out[fields[9]] = Socket{Proto: proto, Local: local, Remote: remote, State: fields[3]}
	}
	return out, sc.Err()
}

// parseProcAddr reads "0100007F:1F90": the address in the kernel's byte
// order, 32 bits at a time, and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	a, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(a, uint16(port)), nil
}
