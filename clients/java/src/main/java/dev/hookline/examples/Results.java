package dev.hookline.examples;

import hookline.v1.Records.AttemptResult;
import hookline.v1.Records.DeliveryState;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Read Hookline's results topic and print each delivery's outcome.
 *
 * <p>Every AttemptResult on hookline.results is decoded with the classes generated from proto/.
 * Hookline writes that topic in Kafka transactions, so the consumer reads committed records only
 * (isolation.level=read_committed).
 *
 * <p>Environment: HOOKLINE_KAFKA_BROKERS (default 127.0.0.1:9092, make run's),
 * HOOKLINE_RESULTS_TOPIC (default hookline.results), HOOKLINE_RESULTS_GROUP (default
 * hookline-results-example), HOOKLINE_WAIT_SECONDS (with a delivery id: how long to wait for it,
 * default 60).
 *
 * <p>Arguments: [DELIVERY_ID]. With it, stop at that delivery's terminal result (exit 0 when
 * delivered); without, print results until interrupted.
 */
public final class Results {
  private Results() {}

  static String describe(AttemptResult r) {
    return r.getDeliveryId() + " attempt=" + r.getAttempt() + " state=" + r.getState()
        + " class=" + r.getClass_() + " status=" + r.getStatusCode()
        + " event=" + r.getEventId() + " endpoint=" + r.getEndpointId();
  }

  public static void main(String[] args) throws Exception {
    String want = args.length > 0 ? args[0] : null;
    long deadline =
        System.currentTimeMillis()
            + (long) (1000 * Double.parseDouble(HooklineChannel.env("HOOKLINE_WAIT_SECONDS", "60")));
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, HooklineChannel.env("HOOKLINE_KAFKA_BROKERS", "127.0.0.1:9092"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, HooklineChannel.env("HOOKLINE_RESULTS_GROUP", "hookline-results-example"));
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.subscribe(List.of(HooklineChannel.env("HOOKLINE_RESULTS_TOPIC", "hookline.results")));
      while (want == null || System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(500))) {
          AttemptResult r = AttemptResult.parseFrom(rec.value());
          System.out.println(describe(r));
          if (r.getDeliveryId().equals(want) && Publish.TERMINAL.contains(r.getState())) {
            System.exit(r.getState() == DeliveryState.DELIVERY_STATE_DELIVERED ? 0 : 1);
          }
        }
      }
    }
    System.err.println("no terminal result for " + want + " in time");
    System.exit(1);
  }
}
