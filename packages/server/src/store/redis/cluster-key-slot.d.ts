// cluster-key-slot ships no types: the Redis Cluster hash slot of a key (hash tags honoured).
declare module "cluster-key-slot" {
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
