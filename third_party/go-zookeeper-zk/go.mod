module github.com/go-zookeeper/zk

go 1.13
