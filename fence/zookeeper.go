package fence

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperDir is the node under which ZooKeeper keeps tokens: the node
// ZooKeeperDir/<resource, path-escaped> holds the highest token seen for
// the resource, in decimal. ZooKeeper creates the directory on first use;
// both are persistent nodes with the open ACL zk.WorldACL(zk.PermAll)
// (create ZooKeeperDir yourself beforehand to choose its ACL).
const ZooKeeperDir = "/padlock-fence"

// zkAttempts bounds how often ZooKeeper retries a multi that another
// writer's token beat to the token node: each retry means another writer
// made progress, so the bound is only ever reached under a storm.
const zkAttempts = 32

// ZooKeeper checks token against the highest recorded for resource (the
// node ZooKeeperNode(resource)), and in one multi records it and applies
// ops, so that nothing lands between the check and the ops. A token below
// the highest returns a *StaleError (errors.Is ErrStale) and applies none
// of ops; otherwise ZooKeeper returns ops' responses, in order. With no
// ops, ZooKeeper only checks and records.
//
// ops are what zk.Conn.Multi takes: *zk.CreateRequest,
// *zk.SetDataRequest, *zk.DeleteRequest and *zk.CheckVersionRequest, none
// on the token node. The token node is read, then the multi sets it at the
// version read (or creates it), so a token recorded in between fails the
// multi as a whole and ZooKeeper reads again, up to 32 times. go-zookeeper
// takes no context: ctx is checked before each request, and a request
// already sent runs to its end.
func ZooKeeper(ctx context.Context, conn *zk.Conn, resource string, token uint64, ops ...any) ([]zk.MultiResponse, error) {
	if err := check(resource, token); err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, invalid("ZooKeeper needs a *zk.Conn")
	}
	path := ZooKeeperNode(resource)
	for i, op := range ops {
		var p string
		switch o := op.(type) {
		case *zk.CreateRequest:
			p = o.Path
		case *zk.SetDataRequest:
			p = o.Path
		case *zk.DeleteRequest:
			p = o.Path
		case *zk.CheckVersionRequest:
			p = o.Path
		default:
			return nil, invalid("op %d is a %T, not a *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest", i, op)
		}
		if p == path {
			return nil, invalid("op %d is on the token node %q itself", i, path)
		}
	}
	tok := []byte(strconv.FormatUint(token, 10))
	acl := zk.WorldACL(zk.PermAll)
	for range zkAttempts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, stat, err := conn.Get(path)
		var first any
		switch {
		case errors.Is(err, zk.ErrNoNode):
			first = &zk.CreateRequest{Path: path, Data: tok, Acl: acl}
		case err != nil:
			return nil, fmt.Errorf("fence: zookeeper: read %s: %w", path, err)
		default:
			highest, perr := strconv.ParseUint(string(data), 10, 64)
			if perr != nil {
				return nil, fmt.Errorf("fence: zookeeper: %s holds %q, not a token", path, data)
			}
			if token < highest {
				return nil, stale(resource, token, highest)
			}
			first = &zk.SetDataRequest{Path: path, Data: tok, Version: stat.Version}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := conn.Multi(append([]any{first}, ops...)...)
		if err == nil {
			return res[1:], nil
		}
		if len(res) == 0 {
			return nil, fmt.Errorf("fence: zookeeper: %w", err)
		}
		switch e := res[0].Error; {
		case errors.Is(e, zk.ErrBadVersion), errors.Is(e, zk.ErrNodeExists):
			continue // another token was recorded meanwhile: read it
		case errors.Is(e, zk.ErrNoNode): // no ZooKeeperDir yet
			if _, err := conn.Create(ZooKeeperDir, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, fmt.Errorf("fence: zookeeper: create %s: %w", ZooKeeperDir, err)
			}
			continue
		}
		for i, r := range res[1:] {
			if r.Error != nil && errors.Is(r.Error, err) { // the op that failed the multi
				return nil, fmt.Errorf("fence: zookeeper: op %d: %w", i, err)
			}
		}
		return nil, fmt.Errorf("fence: zookeeper: %w", err)
	}
	return nil, fmt.Errorf("fence: zookeeper: token node %s changed under each of %d attempts", path, zkAttempts)
}

// ZooKeeperNode returns the path of resource's token node:
// ZooKeeperDir, a slash, and the resource path-escaped (its slashes too,
// and its dots when it is "." or "..", names ZooKeeper refuses).
func ZooKeeperNode(resource string) string {
	name := url.PathEscape(resource)
	if name == "." || name == ".." {
		name = strings.ReplaceAll(name, ".", "%2E")
	}
	return ZooKeeperDir + "/" + name
}
