// Package all registers every padlock backend. Import it for its side
// effect when the backend is chosen by URL at run time:
//
//	import _ "github.com/padlock-go/padlock/all"
package all

import (
	_ "github.com/padlock-go/padlock/etcd"      // etcd://
	_ "github.com/padlock-go/padlock/memory"    // mem://
	_ "github.com/padlock-go/padlock/mysqlpg"   // postgres://, postgresql://, mysql://
	_ "github.com/padlock-go/padlock/redis"     // redis://, rediss://, redis+cluster://, redis+sentinel://, redlock://
	_ "github.com/padlock-go/padlock/zookeeper" // zk://, zks://
)
