use ferrisson_semaphore::{Client, ClientConfig, Semaphore};

pub async fn call_partner(url: &str) -> ferrisson_semaphore::Result<()> {
    let client = Client::with_config(ClientConfig::new(url)).await?;
    // Every instance builds it with the limit: a count Redis lost is set again by itself.
    let limit = Semaphore::new(&client, "partner-api")?.with_limit(20)?;
    let permit = limit.acquire().await?; // waits while 20 calls are in flight
    // ... call the partner API ...
    permit.release().await?;
    client.shutdown().await
}
