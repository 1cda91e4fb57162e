use std::time::Duration;

use ferrisson::prelude::*; // every trait and type, for the features that are on

pub async fn limits(client: &Client) -> ferrisson::Result<()> {
    // At most 20 calls in flight; a crashed worker's permit comes back with its lease.
    let in_flight = ExpirableSemaphore::new(client, "partner:in-flight")?.with_limit(20)?;
    // At most 5 calls a second, across every instance.
    let per_second = RateArgs::new(RateType::Overall, 5, Duration::from_secs(1));
    let rate = RateLimiter::new(client, "partner:rate")?.with_rate(per_second)?;
    // At most 100 jobs queued; permits without a lease, given back by hand.
    let queued = Semaphore::new(client, "partner:queue")?.with_limit(100)?;

    let job = queued.acquire().await?;
    let status = in_flight
        .with(|_| async {
            rate.acquire(1).await?;
            Ok::<_, ferrisson::Error>(200) // ... call the partner API ...
        })
        .await??;
    job.release().await?;
    assert_eq!(status, 200);
    Ok(())
}
